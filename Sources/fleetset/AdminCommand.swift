import ArgumentParser
import Curl
import FleetClient
import FleetIO
import FleetJSON
import FleetMetadata
import FleetProtocol

#if canImport(Glibc)
import Glibc
#endif

/// `fleetset admin …`: the server's admin API, over fleetset's libcurl client.
///
/// Exit status: 0 done; 1 the server refused (its error code, message and details are
/// printed); 2 usage, an unreadable file, or a server that cannot be reached.
struct AdminCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "admin",
        abstract: "Manage a fleetset server: metadata, values per scope, devices, enrollment tokens.",
        discussion: """
            The server and the token come from --server and --token-file, or from \
            FLEETSET_SERVER and FLEETSET_ADMIN_TOKEN_FILE, or from `fleetset admin login`. Plain http:// is accepted only for a \
            loopback server; anything else must be https:// (verified against the system's CAs or \
            --ca-file). Values of settings marked x-secret are shown as ******** (the server \
            never returns them to admins). Tokens are never printed: an enrollment token is \
            written to a file of mode 0600.
            """,
        subcommands: [
            AdminPutMetadata.self, AdminValues.self, AdminSet.self, AdminClear.self, AdminUnset.self, AdminHistory.self, AdminRevert.self,
            AdminRollout.self, AdminDevices.self, AdminGroups.self, AdminPolicy.self, AdminExplain.self, AdminEnrollmentToken.self,
            AdminEnrollmentTokens.self, AdminUsers.self, AdminTokens.self, AdminWhoami.self, AdminAudit.self, AdminLoginCommand.self,
            AdminLogoutCommand.self, AdminPasswordCommand.self, AdminTwoFactor.self, AdminWebhooks.self, AdminExport.self, AdminPlan.self,
            AdminApply.self,
        ]
    )
}

/// Where the server is and how to authenticate: shared by every admin subcommand.
struct ServerOptions: ParsableArguments {
    @Option(help: "The server's base URL (default: $FLEETSET_SERVER).")
    var server: String?

    @Option(help: "A file holding the admin token or an API token (default: $FLEETSET_ADMIN_TOKEN_FILE).")
    var tokenFile: String?

    @Option(help: "PEM CA bundle to verify the server with (default: the system's).")
    var caFile: String?

    @Flag(help: "Print the server's JSON answer instead of text.")
    var json = false

    /// The server's URL: --server, $FLEETSET_SERVER, or (when no token file is given either)
    /// the one `fleetset admin login` kept.
    func serverURL() throws -> String {
        let environment = { (name: String) in getenv(name).map { String(cString: $0) } }
        let givenToken = tokenFile ?? environment("FLEETSET_ADMIN_TOKEN_FILE")
        guard let url = server ?? environment("FLEETSET_SERVER") ?? (givenToken == nil ? AdminLogin.savedServer : nil) else {
            StandardError.write("fleetset admin: give the server with --server URL or FLEETSET_SERVER")
            throw CLIExit.usageOrIO
        }
        return url
    }

    /// The token: from --token-file, $FLEETSET_ADMIN_TOKEN_FILE, or the file `fleetset admin
    /// login` wrote — that one only for the server it was made for.
    func token() throws -> String {
        let environment = { (name: String) in getenv(name).map { String(cString: $0) } }
        var tokenPath = tokenFile ?? environment("FLEETSET_ADMIN_TOKEN_FILE")
        if tokenPath == nil, let login = AdminLogin.tokenFile, access(login, F_OK) == 0 {
            guard try serverURL() == AdminLogin.savedServer else {
                StandardError.write(
                    "fleetset admin: the token of `fleetset admin login` is for \(AdminLogin.savedServer ?? "another server"); give --token-file for this one, or log in to it"
                )
                throw CLIExit.usageOrIO
            }
            tokenPath = login
        }
        guard let tokenPath else {
            StandardError.write(
                "fleetset admin: give a token file with --token-file FILE or FLEETSET_ADMIN_TOKEN_FILE, or sign in with `fleetset admin login`"
            )
            throw CLIExit.usageOrIO
        }
        let token: String
        do {
            token = try FileSystem.readToken(tokenPath)
        } catch {
            StandardError.write("fleetset admin: \(error)")
            throw CLIExit.usageOrIO
        }
        guard !token.isEmpty else {
            StandardError.write("fleetset admin: \(tokenPath) holds no token")
            throw CLIExit.usageOrIO
        }
        return token
    }

    /// Runs `body` with a client for the server; a refusal exits 1, a failure to connect 2.
    func withClient<T>(_ body: (FleetClient) async throws -> T) async throws -> T {
        try await withClient(token: try token(), body)
    }

    /// Runs `body` with a client sending `token` (`nil`: none, for sign-in).
    func withClient<T>(token: String?, _ body: (FleetClient) async throws -> T) async throws -> T {
        let url = try serverURL()
        let configuration = HTTPClient.Configuration(
            tls: .init(caFile: caFile), allowInsecureHTTP: ServerURL.isLoopbackHTTP(url), userAgent: "fleetset-admin")
        do {
            return try await withHTTPClient(configuration: configuration) { http in
                try await body(FleetClient(http: http, baseURL: url, token: token))
            }
        } catch {
            throw CLIExit.reportingServerFailure(error, as: "fleetset admin")
        }
    }

    /// Prints `value` as JSON when --json was given, else `text()`. The text shows what came
    /// from the server through ``TerminalText/escaped(_:keepingNewlinesAndTabs:)`` (tables do
    /// it for their cells); the JSON has its control characters as `\u` escapes.
    func output(_ value: JSONValue, _ text: () -> String) {
        print(json ? TerminalText.serialized(value, .pretty) : text())
    }
}

/// `fleetset admin put-metadata FILE [--moki] [--force]`.
struct AdminPutMetadata: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "put-metadata",
        abstract: "Store an app's metadata document (its version must be greater than the stored one).",
        discussion: """
            With --moki the file is a MokiManage SettingsSchema.json, converted as \
            `fleetset metadata import-moki` does (--app, --writable). The server refuses a new \
            version that makes stored values invalid and lists them; --force stores it anyway and \
            the devices report the error.
            """)

    @OptionGroup var server: ServerOptions

    @Argument(help: "The metadata document, or with --moki a MokiManage SettingsSchema.json.")
    var file: String

    @Flag(help: "The file is a MokiManage SettingsSchema.json.")
    var moki = false

    @Option(help: "With --moki: the app id (default: from the file name).")
    var app: String?

    @Option(name: .customLong("writable"), help: "With --moki: a top-level setting devices may change (repeatable).")
    var writableKeys: [String] = []

    @Flag(help: "Store it even though stored values become invalid, or a rollout of the app runs.")
    var force = false

    @Option(help: "Why, kept in the history (fleetset admin history).")
    var message: String = ""

    func run() async throws {
        let document: JSONValue
        if moki {
            let converter = try MetadataImportMokiCommand.parse(
                [file] + (app.map { ["--app", $0] } ?? []) + writableKeys.flatMap { ["--writable", $0] })
            document = try converter.converted()
        } else {
            document = try Inputs.json(file)
        }
        guard case .string(let appID)? = document.objectValue?["app"], Metadata.isValidAppID(appID) else {
            StandardError.write("fleetset admin: \(file) has no valid \"app\"")
            throw CLIExit.invalidInput
        }
        let bytes = moki ? Array(document.serialized(.pretty).utf8) : try FileSystem.readFile(file)
        let result = try await server.withClient { try await $0.putMetadata(app: appID, document: bytes, force: force, message: message) }
        server.output(result.json) {
            TerminalText.escaped(
                "\(result.app): metadata version \(result.version) stored"
                    + (result.previousVersion.map { " (was \($0))" } ?? " (first version)"))
        }
    }
}

/// The `--app` and `--scope` of the value commands.
struct ScopeOptions: ParsableArguments {
    @Option(help: "The app id.")
    var app: String

    @Option(help: "app, group:NAME or device:ID.")
    var scope: String = "app"
}

/// `fleetset admin values --app A --scope S`.
struct AdminValues: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "values", abstract: "Show the values set at one scope.")

    @OptionGroup var server: ServerOptions
    @OptionGroup var target: ScopeOptions

    func run() async throws {
        let values = try await server.withClient { try await $0.values(app: target.app, scope: target.scope) }
        server.output(values.json) { ScopedValuesText.render(values) }
    }
}

/// `fleetset admin set --app A --scope S KEY=VALUE…`.
struct AdminSet: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set", abstract: "Set values at a scope.",
        discussion: """
            \(ValueTyping.help) It is read as fleetset set reads it on a device, by the app's \
            metadata as the server holds it. The server checks the change against the metadata \
            for every device it reaches before storing it.

            A KEY may be a key path into a setting (playlist/0/content=Hello, ~1 for a / in a name): \
            the server writes the whole setting at the scope, starting from what the scope holds or \
            what its devices get from the wider scopes. A key path is written at once, never staged.

            With --rollout the change is staged: devices get it wave by wave, each wave once \
            the one before reported applied, and the rollout pauses when too many report errors \
            (--pause-on-errors) or a wave does not report in time (--wave-wait). See fleetset \
            admin rollout.
            """)

    @OptionGroup var server: ServerOptions
    @OptionGroup var target: ScopeOptions
    @OptionGroup var change: ChangeOptions

    @Argument(help: "KEY=VALUE pairs.", transform: Assignment.parse)
    var assignments: [Assignment]

    func run() async throws {
        let locations: [JSONPointer]
        do {
            locations = try assignments.map { assignment throws(KeyPath.Malformed) in try assignment.location() }
        } catch {
            StandardError.write("fleetset admin set: \(error)")
            throw CLIExit.usageOrIO
        }
        if change.rollout != nil, case let insides = locations.filter({ $0.tokens.count > 1 }), !insides.isEmpty {
            StandardError.write(
                "fleetset admin set: a rollout stages whole settings; set \(Set(insides.compactMap(\.topLevelKey)).sorted().joined(separator: ", ")) itself, or leave out --rollout"
            )
            throw CLIExit.usageOrIO
        }
        let metadata: Metadata
        let document = try await server.withClient { try await $0.storedMetadata(app: target.app) }
        do {
            metadata = try Metadata(json: document)
        } catch {
            StandardError.write("fleetset admin set: the stored metadata of \(target.app) cannot be read: \(error)")
            throw CLIExit.usageOrIO
        }
        var patch = JSONObject()
        var insides: [(JSONPointer, JSONValue)] = []
        var problems: [String] = []
        for (assignment, path) in zip(assignments, locations) {
            let value: JSONValue
            do {
                value = try metadata.readValue(assignment.valueText, at: path)
            } catch {
                problems.append(error.description)
                continue
            }
            if path.tokens.count > 1 {
                insides.append((path, value))
            } else {
                patch[assignment.key] = value
            }
        }
        guard problems.isEmpty else {
            StandardError.write("fleetset admin set: refused: " + problems.joined(separator: "; "))
            throw CLIExit.invalidInput
        }
        if !patch.isEmpty { try await change.apply(patch, to: target, through: server) }
        for (path, value) in insides { try await change.apply(value, at: path, to: target, through: server) }
    }
}

/// `fleetset admin unset --app A [--scope S] KEY_PATH…`.
struct AdminUnset: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unset", abstract: "Remove values at a scope by key path: a setting (as clear does), or one value inside it.",
        discussion: """
            KEY_PATH is a setting's name, or a slash-separated path inside it: playlist/1 removes \
            the second entry of the playlist, playlist/0/caption one member of the first. The \
            server writes the whole setting at the scope, starting from what the scope holds, or \
            from what its devices get from the wider scopes.
            """)

    @OptionGroup var server: ServerOptions
    @OptionGroup var target: ScopeOptions
    @OptionGroup var change: ChangeOptions

    @Argument(help: "The key paths to remove.")
    var keyPaths: [String]

    func run() async throws {
        for text in keyPaths {
            guard let path = JSONPointer(keyPath: text) else {
                StandardError.write("fleetset admin unset: \(KeyPath.Malformed(text: text))")
                throw CLIExit.usageOrIO
            }
            try await change.apply(nil, at: path, to: target, through: server)
        }
    }
}

/// `fleetset admin clear --app A --scope S KEY…`.
struct AdminClear: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "clear", abstract: "Remove values from a scope (the scope below then shows through).")

    @OptionGroup var server: ServerOptions
    @OptionGroup var target: ScopeOptions

    @OptionGroup var change: ChangeOptions

    @Argument(help: "The keys to clear.")
    var keys: [String]

    func run() async throws {
        var patch = JSONObject()
        for key in keys { patch[key] = .null }
        try await change.apply(patch, to: target, through: server)
    }
}

/// `fleetset admin explain --app A DEVICE`.
struct AdminExplain: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "explain", abstract: "Show a device's effective values and the scope that set each.")

    @OptionGroup var server: ServerOptions

    @Option(help: "The app id.")
    var app: String

    @Argument(help: "The device id.")
    var device: String

    func run() async throws {
        let (explanation, groups) = try await server.withClient { client in
            let explanation = try await client.explain(app: app, deviceID: device)
            // Which groups hold the device and why: a server before groups defined by queries has no list.
            let record = try await client.device(id: device)
            let queries = (try? await client.groups().groups).map { list in
                Dictionary(uniqueKeysWithValues: list.map { ($0.name, $0.conditions) })
            }
            return (explanation, record.groups.map { (name: $0, conditions: queries?[$0] ?? nil) })
        }
        server.output(explanation.json) {
            guard !groups.isEmpty else { return explanation.table }
            let lines = groups.map { "  \($0.name): \(AdminGroupShow.origin($0.conditions))" }
            return explanation.table + "\n\nGroups (where several set a value, the later by name wins)\n"
                + TerminalText.escaped(lines.joined(separator: "\n"), keepingNewlinesAndTabs: true)
        }
    }
}

/// `fleetset admin enrollment-token --out FILE --app A… [--group G]… [--uses N] [--expires-in S]`.
struct AdminEnrollmentToken: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "enrollment-token", abstract: "Make an enrollment token and write it to a file (mode 0600).")

    @OptionGroup var server: ServerOptions

    @Option(help: "Where to write the token (created with mode 0600; never printed).")
    var out: String

    @Option(name: .customLong("app"), help: "An app enrolled devices may read and write (repeatable; at least one).")
    var apps: [String] = []

    @Option(name: .customLong("group"), help: "A group enrolled devices join (repeatable).")
    var groups: [String] = []

    @Option(help: "How many devices may enroll with it.")
    var uses: Int64 = 1

    @Option(help: "Seconds until it expires (60 to 31536000).")
    var expiresIn: Int64 = 86_400

    func validate() throws {
        guard !apps.isEmpty else {
            throw ValidationError("name the apps enrolled devices get with --app (repeatable): a device reads only its own apps")
        }
    }

    func run() async throws {
        let request = EnrollmentTokenRequest(apps: apps, groups: groups, expiresInSeconds: expiresIn, uses: uses)
        let made = try await server.withClient { try await $0.makeEnrollmentToken(request) }
        do {
            try FileSystem.writeAtomically(Array((made.enrollmentToken + "\n").utf8), to: out, mode: 0o600)
        } catch {
            StandardError.write("fleetset admin: \(error)")
            throw CLIExit.usageOrIO
        }
        var shown = made.json
        if case .object(var object) = shown {
            object["enrollmentToken"] = nil
            object["file"] = .string(out)
            shown = .object(object)
        }
        server.output(shown) {
            let groups = made.groups.isEmpty ? "no group" : "group " + made.groups.joined(separator: ", ")
            return TerminalText.escaped(
                "enrollment token \(made.id) for \(made.uses) device(s) of \(made.apps.joined(separator: ", ")) in \(groups), valid until \(Timestamp.format(made.expiresAt)), written to \(out)"
            )
        }
    }
}

/// Values of one scope as text: `kiosk at group:lobby` and a `key = value` line each.
enum ScopedValuesText {
    static func render(_ values: ScopedValues) -> String {
        var text = TerminalText.escaped("\(values.app) at \(values.scope):")
        if values.values.isEmpty { text += " no values" }
        for (key, value) in values.values { text += "\n  " + TerminalText.escaped("\(key) = \(value.serialized(maximumLength: 200))") }
        return text
    }
}

/// Left-aligned columns separated by two spaces. Every cell is shown as
/// ``TerminalText/escaped(_:keepingNewlinesAndTabs:)`` makes it (a line break in a cell as `\n`,
/// an escape sequence as `\e…`), and the columns are padded by that width.
enum Table {
    static func render(_ rows: [[String]]) -> String {
        let rows = rows.map { $0.map { TerminalText.escaped($0) } }
        let columns = rows.map(\.count).max() ?? 0
        let widths = (0..<columns).map { column in rows.map { column < $0.count ? $0[column].count : 0 }.max() ?? 0 }
        return rows.map { row in
            row.enumerated().map { index, cell in
                index == row.count - 1 ? cell : cell + String(repeating: " ", count: widths[index] - cell.count)
            }.joined(separator: "  ")
        }.joined(separator: "\n")
    }
}

extension Explanation {
    /// `d-1 · kiosk schema version 3 · revision 12 served`, then one row per setting and its scope.
    var table: String {
        var rows = [["SETTING", "VALUE", "FROM"]]
        for row in self.rows {
            rows.append([row.key, row.value?.serialized(maximumLength: 60) ?? "-", row.source])
        }
        let served = servedRevision.map { "revision \($0) served" } ?? "nothing served yet"
        var text = TerminalText.escaped("\(device) · \(app) schema version \(schemaVersion) · \(served)") + "\n" + Table.render(rows)
        if !policy.policy.isEmpty {
            text += "\n\nAgent policy from the server (the device's configuration file may pin a key)\n"
            text += Table.render(
                [["KEY", "VALUE", "FROM"]]
                    + AgentPolicy.Key.allCases.compactMap { key in
                        policy.policy[key].map {
                            [key.rawValue, $0.stringValue ?? $0.serialized(), policy.sources[key]?.description ?? "-"]
                        }
                    })
        }
        let facts = DeviceInfo.facts(deviceInfo)
        if !facts.isEmpty { text += "\n\nDevice facts\n" + Table.render([["FACT", "VALUE"]] + facts.map { [$0.name, $0.value] }) }
        return text
    }
}

extension CLIExit {
    /// Writes a failed server request to standard error; returns exit 1 for the server's
    /// refusal, 2 for anything else (unreachable, TLS, a malformed answer).
    static func reportingServerFailure(_ error: any Error, as command: String) -> any Error {
        // StandardError.write shows the server's words (its message, each detail) escaped.
        switch error {
        case let error as FleetClientError:
            StandardError.write("\(command): \(error)")
            return error.status == nil ? usageOrIO : invalidInput
        case let error as HTTPClientError:
            StandardError.write("\(command): \(error)")
            return usageOrIO
        default:
            return error
        }
    }
}
