"""A new user's single-line slips in driver/ and scopehost/ (issue 35's trial), written from
docs/protocol.md alone, each breaking one of its rules, kept as they wrote them. The seeds are
some of those the plain `python -m sims sweep random --seeds 0..199 --jobs 2` fails with the slip
applied (at least five for each); ``CHECK`` is the rule the verdict must name."""

from sims.mutants._ablation import Ablation

SLIPS = {
    # 1. file layer, _identity: the scope record is read by the wrong column (key -> value),
    #    so every file reads as "records no scope" and a file of another scope is served.
    "identity-reads-wrong-column": (
        Ablation(
            module="scopehost._identity",
            old='f"SELECT value FROM {META_TABLE} WHERE key = ?"',
            new='f"SELECT value FROM {META_TABLE} WHERE value = ?"',
        ),
        [18, 66, 73, 75, 83, 94, 96, 103],
    ),
    # 2. file layer, _sqlite_files: frames counted from 0 instead of 1 in the log's frame offset,
    #    so the watch reads past the last valid frame and takes SQLite's own log as "cut".
    "frame-offset-off-by-one": (
        Ablation(
            module="scopehost._sqlite_files",
            old="return LOG_HEADER + (frame - 1) * (FRAME_HEADER + self.page_size)",
            new="return LOG_HEADER + frame * (FRAME_HEADER + self.page_size)",
        ),
        [17, 18, 25, 54, 61, 66, 73, 75],
    ),
    # 3. file layer, _gate: the output gate syncs the database file instead of its log, where
    #    WAL commits are appended; a reply leaves before its write is durable.
    "gate-syncs-database-not-log": (
        Ablation(
            module="scopehost._gate",
            old="self.syncer(self.log, missing_ok=True)",
            new="self.syncer(self.database, missing_ok=True)",
        ),
        [17, 18, 25, 54, 61, 66, 73, 75],
    ),
    # 4. driver/_drive: takeover exhaustion off by one (> for >=): a takeover that charged the
    #    job's last attempt runs the handler once more instead of failing the run.
    "takeover-exhaustion-late": (
        Ablation(
            module="driver._drive",
            old="if claim.takeover and run.attempts >= policy.max_attempts:",
            new="if claim.takeover and run.attempts > policy.max_attempts:",
        ),
        [10, 38, 39, 41, 46, 50, 51, 59],
    ),
    # 5. driver/_pass: a deferred pass writes the door's refusal as the run's last_error.
    "deferral-records-error": (
        Ablation(
            module="driver._pass",
            old="run.last_error,",
            new="refusal,",
        ),
        [0, 6, 9, 11, 15, 18, 21, 46],
    ),
}

# 6. (extra) file layer, _watch: "same size OR same header" taken as metadata only, so a copy
#    written over the open file in place that keeps its size is not refused.
SLIPS["watch-size-or-header"] = (
    Ablation(
        module="scopehost._watch",
        old="if file[2] == sight.file[2] and header == sight.header:",
        new="if file[2] == sight.file[2] or header == sight.header:",
    ),
    [61, 66, 75, 83, 111, 121, 159, 173],
)

# 7. (extra, diagnostic of the rule the sixth aims at) file layer, _watch: the "moved, not
#    changed" test flipped (== for !=), so a file written in place (same device and inode) is
#    never judged: a copy over an open scope is served.
SLIPS["watch-same-inode-skipped"] = (
    Ablation(
        module="scopehost._watch",
        old="file[:2] != sight.file[:2]:",
        new="file[:2] == sight.file[:2]:",
    ),
    [17, 18, 54, 61, 66, 73, 75, 83, 94, 96],
)

#: The check each slip's verdict names.
CHECK = {
    "identity-reads-wrong-column": "file-identity",
    "frame-offset-off-by-one": "file-outside",
    "gate-syncs-database-not-log": "durable-writes",
    "takeover-exhaustion-late": "takeover-exhausted",
    "deferral-records-error": "pass-outcome",
    "watch-size-or-header": "file-behind",
    "watch-same-inode-skipped": "file-behind",
}
