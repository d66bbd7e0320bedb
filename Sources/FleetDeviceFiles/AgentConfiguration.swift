import FleetDeviceState
import FleetIO
import FleetJSON
import FleetMetadata
import FleetProtocol

#if canImport(Glibc)
import Glibc
#endif

/// The agent's configuration file, `/etc/fleetset/fleetsetd.json`: read by `fleetsetd`, and by
/// every device-side `fleetset` command to find the agent's directories.
///
/// | key | type | default | meaning |
/// |---|---|---|---|
/// | `server` | string | required | the server's base URL, `https://…` |
/// | `caFile` | string | the system's CAs | PEM CA bundle the server's certificate must chain to |
/// | `clientCertificate`, `clientKey` | string | none | PEM client certificate and key (mutual TLS); both or neither |
/// | `enrollmentTokenFile` | string | `/etc/fleetset/enrollment-token` | read once, at the first start, to enroll |
/// | `stateDirectory` | string | `/var/lib/fleetset` | identity, and per app settings, metadata, status |
/// | `inboxDirectory` | string | `/var/spool/fleetset` | the local inbox (requests from apps and the CLI) |
/// | `allowInsecureHTTP` | bool | `false` | accept `http://`; only for a loopback server |
/// | `pollInterval` | seconds | 60 | the polling timer when long-polls are not possible |
/// | `jitter` | seconds | 5 | the most random delay added to a poll and before a hook |
/// | `longPollWait` | seconds | 55 | how long the server holds a request; 0 polls on the timer only |
/// | `readyTimeout` | seconds | 60 | tell systemd "ready" after this even if an app has no settings yet |
/// | `logLevel` | string | `info` | `trace`, `debug`, `info`, `notice`, `warning`, `error`, `critical`; a reload (SIGHUP) applies a change |
/// | `statusReports` | string | `full` | `full`: reports carry every problem; `brief`: the first, at most 200 characters |
/// | `apps` | array | required | the apps, see ``AppConfiguration`` |
///
/// `pollInterval`, `jitter`, `longPollWait`, `logLevel` and `statusReports` are also the agent
/// policy's keys (``AgentPolicy``), which an admin may set from the server: a key this file
/// sets is pinned and wins over the server's; a key it leaves out takes the server's value, or
/// the default above (``pinnedPolicy``).
///
/// Unknown keys and bad values are refused with the key's JSON pointer, so a typo such as
/// `"polInterval"` never silently falls back to a default.
public struct AgentConfiguration: Sendable, Equatable {
    /// The default location of the file.
    public static let defaultPath = "/etc/fleetset/fleetsetd.json"

    public var server: String
    public var caFile: String?
    public var clientCertificate: String?
    public var clientKey: String?
    public var enrollmentTokenFile: String
    public var stateDirectory: String
    public var inboxDirectory: String
    public var allowInsecureHTTP: Bool
    public var pollInterval: Duration
    public var jitter: Duration
    /// The long-poll's wait in whole seconds; 0 turns long-polls off.
    public var longPollWait: Int
    public var readyTimeout: Duration
    /// How much each status report says (``AgentPolicy/ReportDetail``).
    public var statusReports: AgentPolicy.ReportDetail
    public var logLevel: String
    public var apps: [AppConfiguration]
    /// The agent policy keys the file sets itself: these win over the server's policy.
    public var pinnedPolicy: Set<AgentPolicy.Key> = []

    /// The levels `logLevel` accepts, lowest first.
    public static let logLevels = AgentPolicy.logLevels

    /// The value of every key the file may leave out, written here once: the reader and the
    /// memberwise initializer both use it.
    public enum Defaults {
        public static let enrollmentTokenFile = "/etc/fleetset/enrollment-token"
        public static let stateDirectory = "/var/lib/fleetset"
        public static let inboxDirectory = "/var/spool/fleetset"
        public static let allowInsecureHTTP = false
        public static let pollInterval: Duration = .seconds(60)
        public static let jitter: Duration = .seconds(5)
        public static let longPollWait = 55
        public static let readyTimeout: Duration = .seconds(60)
        public static let logLevel = "info"
        public static let statusReports = AgentPolicy.ReportDetail.full
    }

    /// Creates a configuration with the documented defaults.
    public init(
        server: String, apps: [AppConfiguration], caFile: String? = nil, clientCertificate: String? = nil, clientKey: String? = nil,
        enrollmentTokenFile: String = Defaults.enrollmentTokenFile, stateDirectory: String = Defaults.stateDirectory,
        inboxDirectory: String = Defaults.inboxDirectory, allowInsecureHTTP: Bool = Defaults.allowInsecureHTTP,
        pollInterval: Duration = Defaults.pollInterval, jitter: Duration = Defaults.jitter, longPollWait: Int = Defaults.longPollWait,
        readyTimeout: Duration = Defaults.readyTimeout, logLevel: String = Defaults.logLevel,
        statusReports: AgentPolicy.ReportDetail = Defaults.statusReports, pinnedPolicy: Set<AgentPolicy.Key> = []
    ) {
        self.statusReports = statusReports
        self.pinnedPolicy = pinnedPolicy
        self.server = server
        self.apps = apps
        self.caFile = caFile
        self.clientCertificate = clientCertificate
        self.clientKey = clientKey
        self.enrollmentTokenFile = enrollmentTokenFile
        self.stateDirectory = stateDirectory
        self.inboxDirectory = inboxDirectory
        self.allowInsecureHTTP = allowInsecureHTTP
        self.pollInterval = pollInterval
        self.jitter = jitter
        self.longPollWait = longPollWait
        self.readyTimeout = readyTimeout
        self.logLevel = logLevel
    }

    /// Where the agent keeps its files.
    public var layout: DeviceLayout { DeviceLayout(stateDirectory: stateDirectory, inboxDirectory: inboxDirectory) }

    /// The app with this id.
    public func app(_ id: String) -> AppConfiguration? { apps.first { $0.id == id } }

    /// Reads and checks the file at `path`, then looks up the users and groups it names: two
    /// steps, ``init(json:)`` reads and ``resolvingAccounts(in:)`` looks up.
    ///
    /// - Parameter owners: when given, the file is read only if it passes their rule (owned by
    ///   root or their user, writable by no one else; ``TrustedOwners``), checked on the open
    ///   file: for a privileged reader, since the file names the server that gets the device's
    ///   token and the directories the reader acts on.
    /// - Throws: ``ConfigurationError`` naming the file and, for a bad value, its JSON pointer;
    ///   for a file that fails `owners`' rule, with ``ConfigurationError/untrusted`` set.
    public static func load(
        _ path: String, accounts: AccountDirectory = .system, trusting owners: TrustedOwners? = nil
    ) throws(ConfigurationError) -> AgentConfiguration {
        let bytes: [UInt8]
        do {
            bytes = try FileSystem.readFile(path, maximumSize: 1 << 20, trusting: owners)
        } catch {
            switch error {
            case .untrusted(let problem):
                let message = "\(problem.detail): it must be owned by \(owners ?? TrustedOwners(user: nil)) and writable by no one else"
                throw ConfigurationError(file: path, message: message, untrusted: problem)
            case .unreadable(let error):
                throw ConfigurationError(file: path, message: "\(error)")
            }
        }
        let document: JSONValue
        do {
            document = try JSONParser.parse(bytes)
        } catch {
            throw ConfigurationError(file: path, message: "not JSON: \(error)")
        }
        do {
            return try AgentConfiguration(json: document).resolvingAccounts(in: accounts)
        } catch {
            throw ConfigurationError(file: path, message: error.description)
        }
    }

    /// This configuration with every user and group name it gives looked up in `directory`
    /// (``AppConfiguration/readersGroup``, ``AppConfiguration/writers``).
    ///
    /// - Throws: the first name with no account, at its JSON pointer.
    public func resolvingAccounts(in directory: AccountDirectory) throws(DocumentError) -> AgentConfiguration {
        var resolved = self
        for index in apps.indices {
            try resolved.apps[index].resolveAccounts(in: directory, at: JSONPointer.root.appending("apps").appending(index: index))
        }
        return resolved
    }

    static let keys: Set<String> = [
        "server", "caFile", "clientCertificate", "clientKey", "enrollmentTokenFile", "stateDirectory", "inboxDirectory",
        "allowInsecureHTTP", "pollInterval", "jitter", "longPollWait", "readyTimeout", "logLevel", "statusReports", "apps", "$comment",
    ]

    /// Reads a configuration document; every problem names its key. Names of users and groups
    /// are read, not looked up: see ``resolvingAccounts(in:)``.
    public init(json: JSONValue) throws(DocumentError) {
        let reader = try ObjectReader(json, allowed: Self.keys, unknownMember: Self.unknownKey(Self.keys))
        server = try reader.string("server", maximumLength: 2048)
        allowInsecureHTTP = try reader.bool("allowInsecureHTTP", default: Defaults.allowInsecureHTTP)
        guard ServerURL.hasHTTPScheme(server) else {
            throw DocumentError(at: reader.location.appending("server"), "must be an https:// URL such as https://fleet.example.com")
        }
        if !server.hasPrefix("https://") {
            guard allowInsecureHTTP else {
                throw DocumentError(
                    at: reader.location.appending("server"), "must be https://; plain http:// needs allowInsecureHTTP (loopback only)")
            }
            guard ServerURL.isLoopbackHTTP(server) else {
                throw DocumentError(
                    at: reader.location.appending("allowInsecureHTTP"),
                    "plain http:// is allowed only to a loopback server (127.0.0.1, ::1, localhost), not \(server)")
            }
        }
        caFile = try reader.path("caFile")
        clientCertificate = try reader.path("clientCertificate")
        clientKey = try reader.path("clientKey")
        if (clientCertificate == nil) != (clientKey == nil) {
            throw DocumentError(
                at: reader.location.appending(clientCertificate == nil ? "clientCertificate" : "clientKey"),
                "clientCertificate and clientKey go together")
        }
        enrollmentTokenFile = try reader.path("enrollmentTokenFile") ?? Defaults.enrollmentTokenFile
        stateDirectory = try reader.path("stateDirectory") ?? Defaults.stateDirectory
        inboxDirectory = try reader.path("inboxDirectory") ?? Defaults.inboxDirectory
        pollInterval = try reader.seconds("pollInterval", in: 0.1...86_400, default: Defaults.pollInterval)
        jitter = try reader.seconds("jitter", in: 0...3600, default: Defaults.jitter)
        longPollWait = Int(try reader.integer("longPollWait", in: 0...300, default: Int64(Defaults.longPollWait)))
        readyTimeout = try reader.seconds("readyTimeout", in: 0...3600, default: Defaults.readyTimeout)
        statusReports =
            try reader.object["statusReports"].map { value throws(DocumentError) in
                guard case .string(let text) = value, let detail = AgentPolicy.ReportDetail(rawValue: text) else {
                    throw DocumentError(
                        at: reader.location.appending("statusReports"),
                        "must be one of \(AgentPolicy.ReportDetail.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", "))")
                }
                return detail
            } ?? Defaults.statusReports
        logLevel = try reader.optionalString("logLevel", maximumLength: 16) ?? Defaults.logLevel
        guard Self.logLevels.contains(logLevel) else {
            throw DocumentError(
                at: reader.location.appending("logLevel"),
                "must be one of \(Self.logLevels.map { "\"\($0)\"" }.joined(separator: ", ")) (got \"\(logLevel)\")")
        }
        guard case .array(let list)? = reader.object["apps"], !list.isEmpty, list.count <= 64 else {
            throw reader.missingOr("apps", "must be an array of 1 to 64 apps, each {\"id\", \"onChange\", \"hookTimeout\"}")
        }
        var apps: [AppConfiguration] = []
        for (index, element) in list.enumerated() {
            let app = try AppConfiguration(json: element, at: reader.location.appending("apps").appending(index: index))
            if apps.contains(where: { $0.id == app.id }) {
                throw DocumentError(
                    at: reader.location.appending("apps").appending(index: index).appending("id"), "\"\(app.id)\" is listed twice")
            }
            apps.append(app)
        }
        self.apps = apps
        pinnedPolicy = Set(AgentPolicy.Key.allCases.filter { reader.object[$0.rawValue] != nil })
    }

    static func unknownKey(_ keys: Set<String>) -> String {
        "unknown key; the keys are " + keys.filter { !$0.hasPrefix("$") }.sorted().joined(separator: ", ")
    }
}

/// One app the agent keeps settings for: an element of the configuration's `apps`.
///
/// | key | type | default | meaning |
/// |---|---|---|---|
/// | `id` | string | required | the app's id on the server (`a-z 0-9 . _ -`) |
/// | `onChange` | array of strings | none | the hook: an absolute program path and its arguments, run after each apply |
/// | `hookTimeout` | seconds | 30 | the hook is stopped (SIGTERM, then SIGKILL) after this |
/// | `readers` | string | the agent's group | the group that may read the app's `settings.json` (mode 0640) |
/// | `writers` | object | root and the agent's user | `{"users": [names], "groups": [names]}`: who may leave requests in the app's inbox |
/// | `expectAck` | boolean | false | the app acknowledges each revision itself (`fleetset ack`, the library) |
/// | `ackTimeout` | seconds | 60 | with `expectAck`: no acknowledgement in this time is reported as `unsupported` |
/// | `rollbackOnError` | boolean | false | when the hook fails or the app reports an error, restore the previous settings, run the hook again, report `error` |
/// | `applyWindows` | array of strings | none (any time) | when new settings may be applied, device local time: `"Mon-Fri 02:00-04:00"`, `"daily 22:00-06:00"` (see ``ApplyWindow``) |
/// | `updateLockMaxHold` | seconds | 3600 | the longest the app may keep a revision out by holding `updates.lock`; then it is applied anyway and its `applied` report says why |
public struct AppConfiguration: Sendable, Equatable {
    public var id: String
    /// The hook command, `[program, arguments…]`; empty for none.
    public var onChange: [String]
    public var hookTimeout: Duration
    /// The group that may read the settings (by name), `nil` for the agent's own group.
    public var readers: String?
    /// Who may leave requests in the app's inbox, by name.
    public var writerNames: WriterNames
    /// `readers`' id, once looked up (``AgentConfiguration/resolvingAccounts(in:)``).
    public private(set) var readersGroup: gid_t?
    /// Who may leave requests, with their ids, once looked up; until then root and the agent's
    /// user only.
    public private(set) var writers = Writers()
    /// Whether the app acknowledges each revision itself.
    public var expectAck: Bool
    /// How long the agent waits for the app's acknowledgement.
    public var ackTimeout: Duration
    /// Restore the previous generation when the hook fails or the app reports an error.
    public var rollbackOnError: Bool
    /// When new settings may be applied; empty: at any time.
    public var applyWindows: [ApplyWindow]
    /// The longest the app may hold its update lock against a checked revision.
    public var updateLockMaxHold: Duration

    /// The value of every key an app's entry may leave out.
    public enum Defaults {
        public static let hookTimeout: Duration = .seconds(30)
        public static let expectAck = false
        public static let ackTimeout: Duration = .seconds(60)
        public static let rollbackOnError = false
        public static let updateLockMaxHold: Duration = .seconds(3600)
    }

    /// Creates an app entry (names not looked up yet).
    public init(
        id: String, onChange: [String] = [], hookTimeout: Duration = Defaults.hookTimeout, readers: String? = nil,
        writerNames: WriterNames = WriterNames(), expectAck: Bool = Defaults.expectAck, ackTimeout: Duration = Defaults.ackTimeout,
        rollbackOnError: Bool = Defaults.rollbackOnError, applyWindows: [ApplyWindow] = [],
        updateLockMaxHold: Duration = Defaults.updateLockMaxHold
    ) {
        self.updateLockMaxHold = updateLockMaxHold
        self.id = id
        self.onChange = onChange
        self.hookTimeout = hookTimeout
        self.readers = readers
        self.writerNames = writerNames
        self.expectAck = expectAck
        self.ackTimeout = ackTimeout
        self.rollbackOnError = rollbackOnError
        self.applyWindows = applyWindows
    }

    /// Looks up `readers` and the writers' names; `location` is this entry's pointer, for errors.
    mutating func resolveAccounts(in directory: AccountDirectory, at location: JSONPointer) throws(DocumentError) {
        if let readers {
            guard let id = directory.groupID(readers) else {
                throw DocumentError(at: location.appending("readers"), "there is no group named \"\(readers)\" on this system")
            }
            readersGroup = id
        }
        let writersLocation = location.appending("writers")
        let users = try Self.lookUp(writerNames.users, "user", at: writersLocation.appending("users"), directory.userID)
        let groups = try Self.lookUp(writerNames.groups, "group", at: writersLocation.appending("groups"), directory.groupID)
        writers = Writers(users: users, groups: groups)
    }

    /// Each name's id; the first name with no account is an error at its index under `location`.
    private static func lookUp<ID>(
        _ names: [String], _ kind: String, at location: JSONPointer, _ lookup: (String) -> ID?
    ) throws(DocumentError) -> [String: ID] {
        var ids: [String: ID] = [:]
        for (index, name) in names.enumerated() {
            guard let id = lookup(name) else {
                throw DocumentError(at: location.appending(index: index), "there is no \(kind) named \"\(name)\" on this system")
            }
            ids[name] = id
        }
        return ids
    }

    static let keys: Set<String> = [
        "id", "onChange", "hookTimeout", "readers", "writers", "expectAck", "ackTimeout", "rollbackOnError", "applyWindows",
        "updateLockMaxHold", "$comment",
    ]

    /// Reads an element of `apps`.
    public init(json: JSONValue, at location: JSONPointer) throws(DocumentError) {
        let reader = try ObjectReader(json, at: location, allowed: Self.keys, unknownMember: AgentConfiguration.unknownKey(Self.keys))
        id = try reader.string("id", maximumLength: 64)
        guard Metadata.isValidAppID(id) else {
            throw DocumentError(at: location.appending("id"), "\"\(id)\" is not an app id: use 1 to 64 of a-z, 0-9, '.', '_', '-'")
        }
        var command: [String] = []
        if let value = reader.object["onChange"] {
            guard case .array(let parts) = value, (1...64).contains(parts.count) else {
                throw DocumentError(at: location.appending("onChange"), "must be an array: the program's absolute path, then its arguments")
            }
            for (index, part) in parts.enumerated() {
                guard case .string(let text) = part, !text.utf8.contains(0), text.utf8.count <= 4096 else {
                    throw DocumentError(at: location.appending("onChange").appending(index: index), "must be a string")
                }
                command.append(text)
            }
            guard command[0].hasPrefix("/") else {
                throw DocumentError(
                    at: location.appending("onChange").appending(index: 0), "must be an absolute path such as /usr/bin/logger")
            }
        }
        onChange = command
        hookTimeout = try reader.seconds("hookTimeout", in: 0.1...3600, default: Defaults.hookTimeout)
        readers = try reader.optionalString("readers", maximumLength: 32)
        if readers?.isEmpty == true { throw DocumentError(at: location.appending("readers"), "must name a group") }
        writerNames =
            try reader.object["writers"].map { value throws(DocumentError) in
                try WriterNames(json: value, at: location.appending("writers"))
            }
            ?? WriterNames()
        expectAck = try reader.bool("expectAck", default: Defaults.expectAck)
        ackTimeout = try reader.seconds("ackTimeout", in: 1...86_400, default: Defaults.ackTimeout)
        rollbackOnError = try reader.bool("rollbackOnError", default: Defaults.rollbackOnError)
        updateLockMaxHold = try reader.seconds("updateLockMaxHold", in: 60...604_800, default: Defaults.updateLockMaxHold)
        if reader.object["applyWindows"] != nil {
            applyWindows = try reader.array("applyWindows") { value, pointer throws(DocumentError) in
                guard case .string(let text) = value, let window = ApplyWindow(text) else {
                    throw DocumentError(
                        at: pointer,
                        "must be a window like \"Mon-Fri 02:00-04:00\" or \"daily 22:00-06:00\": days (daily, Mon, Mon-Fri, Sat,Sun), then HH:MM-HH:MM in local time"
                    )
                }
                return window
            }
            guard !applyWindows.isEmpty else {
                throw DocumentError(
                    at: location.appending("applyWindows"), "must name at least one window; leave it out to apply at any time")
            }
        } else {
            applyWindows = []
        }
    }
}

/// Who may leave requests in an app's inbox, as the configuration names them:
/// `{"users": [...], "groups": [...]}`.
public struct WriterNames: Sendable, Equatable {
    public var users: [String]
    public var groups: [String]

    public init(users: [String] = [], groups: [String] = []) {
        self.users = users
        self.groups = groups
    }

    /// Reads `{"users": [...], "groups": [...]}` (names only; nothing is looked up).
    public init(json: JSONValue, at location: JSONPointer) throws(DocumentError) {
        let reader = try ObjectReader(
            json, at: location, allowed: ["users", "groups"], unknownMember: "is not a key here: use users, groups")
        users = try reader.names("users", maximumCount: 64, maximumLength: 32) ?? []
        groups = try reader.names("groups", maximumCount: 64, maximumLength: 32) ?? []
    }
}

/// Why the configuration file was refused: the file and what is wrong where.
public struct ConfigurationError: Error, Sendable, CustomStringConvertible {
    /// The configuration file.
    public let file: String
    /// `/apps/0/hookTimeout: must be a number of seconds from 0.1 to 3600`.
    public let message: String
    /// Why the file was not read, when it failed the owners' rule of
    /// ``AgentConfiguration/load(_:accounts:trusting:)``.
    public var untrusted: OwnershipProblem? = nil

    /// `fleetsetd.json: /pollInterval: must be …`.
    public var description: String { "\(file): \(message)" }
}

extension ObjectReader {
    /// A Boolean, or `defaultValue` when absent.
    func bool(_ key: String, default defaultValue: Bool) throws(DocumentError) -> Bool {
        guard let value = object[key] else { return defaultValue }
        guard case .bool(let flag) = value else { throw DocumentError(at: location.appending(key), "must be true or false") }
        return flag
    }

    /// A number of seconds in `range` (fractions allowed), or `defaultValue` when absent.
    func seconds(_ key: String, in range: ClosedRange<Double>, default defaultValue: Duration) throws(DocumentError) -> Duration {
        guard let value = object[key] else { return defaultValue }
        guard case .number(let number) = value, range.contains(number.doubleValue) else {
            let shown = { (bound: Double) in bound == bound.rounded() ? String(Int64(bound)) : String(bound) }
            throw DocumentError(
                at: location.appending(key),
                "must be a number of seconds from \(shown(range.lowerBound)) to \(shown(range.upperBound)) (got \(value.serialized()))")
        }
        return .milliseconds(Int64((number.doubleValue * 1000).rounded()))
    }

    /// A non-empty file path, or `nil` when absent.
    func path(_ key: String) throws(DocumentError) -> String? {
        guard let text = try optionalString(key, maximumLength: 4096) else { return nil }
        guard !text.isEmpty, !text.utf8.contains(0) else { throw DocumentError(at: location.appending(key), "must be a file path") }
        return text
    }
}

/// Where user and group names are looked up: the system's databases, or a table (tests).
public struct AccountDirectory: Sendable {
    public var userID: @Sendable (String) -> uid_t?
    public var groupID: @Sendable (String) -> gid_t?

    public init(userID: @escaping @Sendable (String) -> uid_t?, groupID: @escaping @Sendable (String) -> gid_t?) {
        self.userID = userID
        self.groupID = groupID
    }

    /// `getpwnam_r` and `getgrnam_r`.
    public static let system = AccountDirectory(userID: AccountLookup.userID(of:), groupID: AccountLookup.groupID(of:))
}
