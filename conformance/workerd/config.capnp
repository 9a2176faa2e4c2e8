# workerd's configuration of the conformance target: one worker on loopback, one SQLite-backed
# Durable Object per scope. The kit passes the listening address (--socket-addr http=127.0.0.1:0,
# the port read back from --control-fd) and a fresh temporary folder for the objects' SQLite files
# (--directory-path scopes=DIR), so every run of the kit starts from empty scopes.
using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [
    (name = "main", worker = .worker),
    (name = "scopes", disk = (path = "/nonexistent", writable = true)),
  ],
  sockets = [(name = "http", address = "127.0.0.1:0", http = (), service = "main")],
);

const worker :Workerd.Worker = (
  modules = [
    (name = "worker.js", esModule = embed "worker.js"),
    (name = "spec-sql.js", esModule = embed "spec-sql.js"),
  ],
  compatibilityDate = "2025-09-01",
  durableObjectNamespaces = [
    (className = "Scope", uniqueKey = "jobrun-conformance-scope", enableSql = true),
  ],
  durableObjectStorage = (localDisk = "scopes"),
  bindings = [(name = "SCOPES", durableObjectNamespace = "Scope")],
);
