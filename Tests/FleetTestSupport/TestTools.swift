import ChildProcess
import Foundation

/// Where tests find the repository's files, and the tools beyond Swift some of them drive: the
/// Python tools `scripts/python-tools` makes (`.build/python-tools`) and Debian's chromium
/// with chromium-driver (`scripts/install-deps`).
///
/// A test that needs them runs when they are there, and is skipped with a message when they
/// are not, unless `FLEETSET_REQUIRE_PYTHON_TOOLS` is set (as `scripts/test` sets it): then it
/// runs, and fails for what is missing.
public enum TestTools {
    /// The repository's root folder.
    public static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path
    /// The folder of the Python tools' executables.
    public static let pythonBin = repository + "/.build/python-tools/bin"
    /// The Python of the tools' environment.
    public static let python = pythonBin + "/python"
    /// Whether the test command requires the tools (`FLEETSET_REQUIRE_PYTHON_TOOLS`).
    public static let required = ProcessInfo.processInfo.environment["FLEETSET_REQUIRE_PYTHON_TOOLS"] != nil

    /// Whether every one of `paths` is an executable file.
    public static func present(_ paths: String...) -> Bool {
        paths.allSatisfy { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// Whether the browser tests' tools are here: the Python tools, chromium and its driver.
    public static let browserPresent = present(python, "/usr/bin/chromium", "/usr/bin/chromedriver")

    /// A port nothing listens on on 127.0.0.1 (bound and released), for a child process that is
    /// told it before it binds it. Below the kernel's ephemeral range: no server of another test
    /// bound to port 0 (nor an outgoing connection) is given it meanwhile, as happened to the
    /// test PostgreSQL cluster and to a webhook receiver under full-suite load.
    public static func freePort() throws -> Int {
        guard let port = ChildProcess.freeLocalPort(belowEphemeralRange: true) else {
            throw ProcessFailed(log: "no free port below the ephemeral range on 127.0.0.1")
        }
        return port
    }
}
