import Curl
import FleetClient
import FleetDeviceFiles
import FleetDeviceState
import FleetJSON
import FleetMetadata
import FleetProtocol
import FleetTestSupport
import Foundation

/// One test's fleet: a real `fleetset-server` on 127.0.0.1 with its own SQLite file, an admin
/// client over libcurl, and the files of one device whose agent the test starts as a process.
final class Fleet: Sendable {
    let directory: String
    let server: ServerProcess
    let http: HTTPClient
    private let adminToken: String
    /// The `fleetsetd` the fleet's devices run (this build's, unless a test names another).
    let agentExecutable: String

    /// The device's directories.
    var layout: DeviceLayout { DeviceLayout(stateDirectory: directory + "/state", inboxDirectory: directory + "/inbox") }
    /// The admin side of the server.
    var admin: FleetClient { FleetClient(http: http, baseURL: server.url, token: adminToken) }
    /// `--server URL --token-file FILE`: what `fleetset admin` needs to reach this server.
    var adminArguments: [String] { ["--server", server.url, "--token-file", directory + "/admin.token"] }

    private init(directory: String, server: ServerProcess, http: HTTPClient, adminToken: String, agentExecutable: String) {
        self.agentExecutable = agentExecutable
        self.directory = directory
        self.server = server
        self.http = http
        self.adminToken = adminToken
    }

    /// Starts a server in a fresh folder; with `tls`, over HTTPS with a self-signed certificate
    /// for 127.0.0.1 (`certificateFile`), made with openssl.
    ///
    /// - Parameter serverArguments: more `fleetset-server serve` options.
    ///   - clientCertificates: with `tls`, the server requires client certificates signed by a CA
    ///     made here (mutual TLS); ``clientCertificateFile`` and ``clientKeyFile`` are one, which
    ///     the fleet's own client uses too.
    ///   - serverExecutable, agentExecutable: another build's `fleetset-server` and `fleetsetd`
    ///     (the last release's, for the wire-compatibility tests).
    static func start(
        tls: Bool = false, clientCertificates: Bool = false, serverArguments: [String] = [],
        serverExecutable: String = CLIRunner.product("fleetset-server"), agentExecutable: String = CLIRunner.product("fleetsetd")
    ) async throws -> Fleet {
        let directory = try CLIRunner.temporaryDirectory().path
        var certificate: (certificate: String, key: String)?
        var arguments = serverArguments
        if tls {
            certificate = (directory + "/server.pem", directory + "/server.key")
            try await openssl([
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj",
                "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", directory + "/server.key", "-out",
                directory + "/server.pem",
            ])
        }
        if tls && clientCertificates {
            try await openssl([
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj",
                "/CN=fleet devices CA", "-keyout", directory + "/devices-ca.key", "-out", directory + "/devices-ca.pem",
            ])
            try await openssl([
                "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-subj", "/CN=device", "-keyout",
                directory + "/client.key", "-out", directory + "/client.csr",
            ])
            try await openssl([
                "x509", "-req", "-in", directory + "/client.csr", "-CA", directory + "/devices-ca.pem", "-CAkey",
                directory + "/devices-ca.key",
                "-CAcreateserial", "-days", "1", "-out", directory + "/client.pem",
            ])
            arguments += ["--client-ca", directory + "/devices-ca.pem"]
        }
        let server = try await ServerProcess.start(
            in: directory, tls: certificate, extraArguments: arguments, executable: serverExecutable)
        let token = try String(contentsOfFile: directory + "/admin.token", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let http = try HTTPClient(
            configuration: .init(
                tls: .init(
                    caFile: certificate?.certificate, clientCertificateFile: clientCertificates ? directory + "/client.pem" : nil,
                    clientKeyFile: clientCertificates ? directory + "/client.key" : nil), allowInsecureHTTP: !tls))
        return Fleet(directory: directory, server: server, http: http, adminToken: token, agentExecutable: agentExecutable)
    }

    /// Runs openssl; throws with its error output when it fails.
    static func openssl(_ arguments: [String]) async throws {
        let made = try await CLIRunner.run(arguments, executable: "/usr/bin/openssl")
        guard made.status == 0 else { throw ProcessFailed(log: made.standardError) }
    }

    /// With `clientCertificates`: a client certificate the server accepts, and its key.
    var clientCertificateFile: String { directory + "/client.pem" }
    var clientKeyFile: String { directory + "/client.key" }

    /// The server's certificate, when it serves HTTPS.
    var certificateFile: String { directory + "/server.pem" }

    /// Stops the server and removes the folder.
    func stop() async {
        server.kill()
        await http.shutdown()
        try? FileManager.default.removeItem(atPath: directory)
    }

    // MARK: - Server side

    /// A small app's metadata: `greeting` (writable), `volume` 0…`volumeMaximum`, a secret
    /// `pin` (writable), and a `counter`.
    static func metadata(app: String, version: Int, volumeMaximum: Int = 10) -> JSONValue {
        [
            "app": .string(app), "version": .number(.integer(Int64(version))),
            "schema": [
                "type": "object", "additionalProperties": false,
                "properties": [
                    "greeting": ["type": "string", "title": "Greeting", "default": "hello", "x-writable": true],
                    "volume": [
                        "type": "integer", "minimum": 0, "maximum": .number(.integer(Int64(volumeMaximum))),
                        "default": .number(.integer(Int64(min(5, volumeMaximum)))),
                    ],
                    "pin": ["type": "string", "default": "0000", "x-secret": true, "x-writable": true],
                    "counter": ["type": "integer", "default": 0],
                ],
            ],
        ]
    }

    /// Stores ``metadata(app:version:volumeMaximum:)``.
    func putMetadata(app: String, version: Int = 1, volumeMaximum: Int = 10, force: Bool = false) async throws {
        let document = Self.metadata(app: app, version: version, volumeMaximum: volumeMaximum)
        _ = try await admin.putMetadata(app: app, document: Array(document.serialized().utf8), force: force)
    }

    /// The long-polls the server holds now (its `fleetset_long_polls_held` gauge).
    func heldLongPolls() async throws -> Int {
        try await longPollsHeld(http: http, baseURL: server.url, adminToken: adminToken)
    }

    /// Sets values at app scope.
    func set(_ app: String, _ values: JSONObject) async throws {
        _ = try await admin.patchValues(app: app, scope: "app", patch: values)
    }

    /// Makes an enrollment token for `apps` (by default every app the agent tests use) and
    /// writes it where the agent's configuration points.
    func makeEnrollmentToken(apps: [String] = Fleet.testApps) async throws {
        let made = try await admin.makeEnrollmentToken(EnrollmentTokenRequest(apps: apps))
        try FileSystemWrite.text(made.enrollmentToken + "\n", to: enrollmentTokenFile, mode: 0o600)
    }

    var enrollmentTokenFile: String { directory + "/enrollment-token" }

    /// The apps the agent tests configure.
    static let testApps = [
        "a", "cams", "crash", "door", "fails", "gate", "hangs", "kiosk", "lobby", "menu", "missing", "ok", "panel", "secure", "sign",
        "till",
    ]

    // MARK: - The device

    /// Writes the agent's configuration and returns its path. `apps` are the `apps` entries;
    /// `server` defaults to this fleet's server.
    @discardableResult
    func writeConfiguration(apps: [JSONValue], server url: String? = nil, extra: JSONObject = [:], name: String = "fleetsetd.json")
        throws -> String
    {
        var object: JSONObject = [
            "server": .string(url ?? server.url), "allowInsecureHTTP": .bool(!server.secure),
            "enrollmentTokenFile": .string(enrollmentTokenFile),
            "stateDirectory": .string(layout.stateDirectory), "inboxDirectory": .string(layout.inboxDirectory), "jitter": 0,
            "apps": .array(apps),
        ]
        for (key, value) in extra { object[key] = value }
        let path = directory + "/" + name
        try FileSystemWrite.text(JSONValue.object(object).serialized(.pretty), to: path, mode: 0o644)
        return path
    }

    var configurationFile: String { directory + "/fleetsetd.json" }

    /// Stores ``metadata(app:version:volumeMaximum:)`` for each app (unless `storeMetadata` is
    /// off: the test stored its own), makes an enrollment token, writes the configuration with
    /// `apps` and starts the agent.
    func launchAgent(
        _ apps: [JSONValue], server url: String? = nil, storeMetadata: Bool = true, environment: [String: String] = [:]
    ) async throws -> RunningProcess {
        if storeMetadata {
            for case .string(let id)? in apps.map({ $0["id"] }) { try await putMetadata(app: id) }
        }
        try await makeEnrollmentToken()
        try writeConfiguration(apps: apps, server: url)
        return try startAgent(environment: environment)
    }

    /// Launches the agent for `apps` (metadata stored as by ``launchAgent(_:server:storeMetadata:environment:)``),
    /// waits for the first app's settings, and stops it with SIGTERM: the device holds settings
    /// and the agent is down (the test changes things, then starts it again).
    @discardableResult
    func syncOnceAndStop(_ apps: [JSONValue]) async throws -> DeviceSettings {
        let agent = try await launchAgent(apps)
        defer { agent.kill() }
        guard case .string(let app)? = apps.first?["id"] else { throw ProcessFailed(log: "no app") }
        let settings = try await waitForSettings(app, agent: agent) { _ in true }
        agent.signal(SIGTERM)
        guard await agent.waitForExit(timeout: .seconds(60)) == 0 else {
            throw ProcessFailed(log: "the agent did not stop cleanly:\n\(agent.log)")
        }
        return settings
    }

    /// Starts `fleetsetd` with the configuration written last.
    func startAgent(environment: [String: String] = [:]) throws -> RunningProcess {
        try RunningProcess(agentExecutable, ["--config", configurationFile], environment: environment)
    }

    /// The app's `settings.json`, `nil` when missing or unreadable.
    func settings(_ app: String) -> DeviceSettings? {
        guard let data = FileManager.default.contents(atPath: layout.settingsFile(app).path),
            let json = try? JSONParser.parse(Array(data))
        else { return nil }
        return try? DeviceSettings(json: json)
    }

    /// The server's `GET /metrics` text (Prometheus), read with the admin token.
    func metricsText() async throws -> String {
        let response = try await http.execute(
            HTTPClient.Request(url: server.url + "/metrics", headers: ["Authorization": "Bearer " + adminToken]))
        return String(decoding: response.body, as: UTF8.self)
    }

    /// Waits until the app's `settings.json` satisfies `condition`.
    @discardableResult
    func waitForSettings(
        _ app: String, timeout: Duration = .seconds(60), agent: RunningProcess? = nil, _ condition: (DeviceSettings) -> Bool
    )
        async throws -> DeviceSettings
    {
        var found: DeviceSettings?
        try await Waiting.until(
            timeout: timeout, "settings of \(app) never matched; agent log:\n\(agent?.log ?? "-")\nserver log:\n\(server.log)"
        ) {
            found = settings(app)
            return found.map(condition) ?? false
        }
        return found!
    }

    /// The app's `status.json`.
    func status(_ app: String) -> AppStatus? { AppStatus.load(layout.statusFile(app)) }

    /// Waits until the app's `status.json` satisfies `condition`.
    @discardableResult
    func waitForStatus(_ app: String, agent: RunningProcess? = nil, _ condition: (AppStatus) -> Bool) async throws -> AppStatus {
        var found: AppStatus?
        try await Waiting.until(
            "status of \(app) never matched: \(found.map { "\($0.json.serialized())" } ?? "none"); agent log:\n\(agent?.log ?? "-")"
        ) {
            found = status(app)
            return found.map(condition) ?? false
        }
        return found!
    }

    /// The device's identity, once enrolled.
    func identity() throws -> DeviceIdentity {
        guard let identity = try DeviceIdentity.load(layout.identityFile) else { throw ProcessFailed(log: "not enrolled") }
        return identity
    }

    /// The device side of the server, with the agent's own token.
    func deviceClient() throws -> FleetClient {
        FleetClient(http: http, baseURL: server.url, token: try identity().deviceToken)
    }

    /// Runs `fleetset` with the agent's configuration.
    func cli(_ arguments: [String], input: String? = nil) async throws -> CLIRunner.Output {
        try await CLIRunner.run(arguments + ["--config", configurationFile], input: input)
    }

    /// The server log's `event=status` lines for `app`.
    func statusLines(_ app: String) -> [String] {
        server.log.split(separator: "\n").map(String.init).filter { $0.contains("event=status") && $0.contains("app=\(app) ") }
    }

    /// Waits for a server `event=status` line of `app` containing every fragment.
    @discardableResult
    func waitForStatusLine(_ app: String, containing fragments: [String], agent: RunningProcess? = nil) async throws -> String {
        var line: String?
        try await Waiting.until("no status line for \(app) with \(fragments); server log:\n\(server.log)\nagent log:\n\(agent?.log ?? "-")")
        {
            line = statusLines(app).first { candidate in fragments.allSatisfy { candidate.contains($0) } }
            return line != nil
        }
        return line!
    }
}

/// Writing test files with an exact mode.
enum FileSystemWrite {
    static func text(_ text: String, to path: String, mode: Int) throws {
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: path)
    }
}
