import FleetIO
import FleetJSON
import FleetProtocol

/// A fleet's settings as a folder of files a person reads and reviews: what `fleetset admin
/// export` writes and `plan` and `apply` read.
///
/// ```
/// apps/APP/metadata.json            the app's metadata document, as the server has it
/// apps/APP/values/app.yaml          the values set for every device of the app
/// apps/APP/values/group/NAME.yaml   … for a group's devices
/// apps/APP/values/device/ID.yaml    … for one device
/// policies/app/APP.yaml             the agent policy of a scope (group/NAME.yaml, device/ID.yaml)
/// groups/NAME.yaml                  a dynamic group: `where:` and its conditions
/// ```
///
/// A scope without values (or a policy without keys) has no file. A group name or device id
/// is its file's name with `%` written `%25`, `/` written `%2F` and a leading `.` written
/// `%2E`. Other files (a README, the tree's own `.git`) are left alone.
public struct SettingsTree: Sendable, Hashable {
    /// One app's part of the tree.
    public struct App: Sendable, Hashable {
        /// The metadata document's bytes (`nil`: the tree has no `metadata.json` for the app).
        public var metadata: [UInt8]?
        /// The values of each scope that has a file (``Scope/app``, ``Scope/group(_:)``,
        /// ``Scope/device(_:)``).
        public var values: [Scope: TreeDocument]

        /// Creates an app's part.
        public init(metadata: [UInt8]? = nil, values: [Scope: TreeDocument] = [:]) {
            self.metadata = metadata
            self.values = values
        }
    }

    /// The apps, by id.
    public var apps: [String: App]
    /// The agent policy of each scope that has one: its keys and values.
    public var policies: [PolicyScope: JSONObject]
    /// The dynamic groups, by name: each one's conditions (`machine.arch=aarch64`).
    public var groups: [String: [String]]

    /// Creates a tree.
    public init(apps: [String: App] = [:], policies: [PolicyScope: JSONObject] = [:], groups: [String: [String]] = [:]) {
        self.apps = apps
        self.policies = policies
        self.groups = groups
    }

    // MARK: - Layout

    /// `apps/APP/metadata.json`.
    public static func metadataPath(app: String) -> String { "apps/\(fileName(app))/metadata.json" }

    /// The values file of `scope` of `app`.
    public static func valuesPath(app: String, scope: Scope) -> String {
        let base = "apps/\(fileName(app))/values/"
        switch scope {
        case .defaults, .app: return base + "app.yaml"
        case .group(let name): return base + "group/\(fileName(name)).yaml"
        case .device(let id): return base + "device/\(fileName(id)).yaml"
        }
    }

    /// The policy file of `scope`.
    public static func policyPath(_ scope: PolicyScope) -> String {
        switch scope {
        case .app(let name): "policies/app/\(fileName(name)).yaml"
        case .group(let name): "policies/group/\(fileName(name)).yaml"
        case .device(let id): "policies/device/\(fileName(id)).yaml"
        }
    }

    /// The definition file of group `name`.
    public static func groupPath(_ name: String) -> String { "groups/\(fileName(name)).yaml" }

    /// A name as a file name: `%` → `%25`, `/` → `%2F`, a leading `.` → `%2E`.
    public static func fileName(_ name: String) -> String {
        var result = ""
        for (offset, character) in name.enumerated() {
            switch character {
            case "%": result += "%25"
            case "/": result += "%2F"
            case "." where offset == 0: result += "%2E"
            default: result.append(character)
            }
        }
        return result
    }

    /// The name a file name stands for (``fileName(_:)`` undone); `nil` for a malformed escape.
    public static func name(fromFile file: Substring) -> String? {
        var result = ""
        var rest = file[...]
        while let percent = rest.firstIndex(of: "%") {
            result += rest[..<percent]
            let code = rest[rest.index(after: percent)...].prefix(2)
            switch code.uppercased() {
            case "25": result += "%"
            case "2F": result += "/"
            case "2E": result += "."
            default: return nil
            }
            rest = rest[code.endIndex...]
        }
        return result + rest
    }

    // MARK: - Files

    /// Every file of the tree: its path (relative to the tree's folder) and its bytes.
    public var files: [String: [UInt8]] {
        var files: [String: [UInt8]] = [:]
        for (app, part) in apps {
            if let metadata = part.metadata { files[Self.metadataPath(app: app)] = metadata }
            for (scope, document) in part.values where !document.isEmpty {
                files[Self.valuesPath(app: app, scope: scope)] = Array(TreeYAML.text(of: document).utf8)
            }
        }
        for (scope, policy) in policies where !policy.isEmpty {
            files[Self.policyPath(scope)] = Array(TreeYAML.text(of: TreeDocument(values: policy)).utf8)
        }
        for (name, conditions) in groups {
            let document = TreeDocument(values: ["where": .array(conditions.map(JSONValue.string))])
            files[Self.groupPath(name)] = Array(TreeYAML.text(of: document).utf8)
        }
        return files
    }

    /// Whether `path` (relative to a tree's folder) is where a tree keeps a file of its own:
    /// under `apps/`, `policies/` or `groups/`, a `.yaml` or `.json` file.
    public static func isTreeFile(_ path: String) -> Bool {
        (path.hasPrefix("apps/") || path.hasPrefix("policies/") || path.hasPrefix("groups/"))
            && (path.hasSuffix(".yaml") || path.hasSuffix(".json"))
    }

    /// Reads the tree from files given by their path (relative to the tree's folder): the tree's
    /// own are read (``isTreeFile(_:)``), the others left alone.
    ///
    /// - Throws: ``TreeError`` naming the file (and the line and column) of the first problem:
    ///   a path outside the layout, YAML that cannot be read, a file of the wrong shape.
    public static func read(files: [String: [UInt8]]) throws(TreeError) -> SettingsTree {
        var tree = SettingsTree()
        for path in files.keys.sorted() where isTreeFile(path) {
            let bytes = files[path] ?? []
            let parts = path.split(separator: "/", omittingEmptySubsequences: false)
            let layout =
                "a settings tree holds apps/APP/metadata.json, apps/APP/values/app.yaml, apps/APP/values/group/NAME.yaml, apps/APP/values/device/ID.yaml, policies/{app,group,device}/NAME.yaml and groups/NAME.yaml"
            guard let last = parts.last, let name = name(fromFile: last.dropLast(5)),
                !name.isEmpty
            else { throw TreeError(file: path, "not a file of a settings tree: \(layout)") }
            let text = { () throws(TreeError) -> String in
                guard let text = String(validating: bytes, as: UTF8.self) else { throw TreeError(file: path, "is not UTF-8 text") }
                return text
            }
            switch (parts.first, parts.count) {
            case ("apps", 3) where last == "metadata.json":
                guard let app = Self.name(fromFile: parts[1]) else {
                    throw TreeError(file: path, "not a file of a settings tree: \(layout)")
                }
                tree.apps[app, default: App()].metadata = bytes
            case ("apps", 4) where parts[2] == "values" && last == "app.yaml",
                ("apps", 5) where parts[2] == "values" && (parts[3] == "group" || parts[3] == "device") && last.hasSuffix(".yaml"):
                guard let app = Self.name(fromFile: parts[1]) else {
                    throw TreeError(file: path, "not a file of a settings tree: \(layout)")
                }
                let scope: Scope = parts.count == 4 ? .app : parts[3] == "group" ? .group(name) : .device(name)
                guard parts.count == 4 || Scope.isValidName(name) else {
                    throw TreeError(file: path, "\(name) is not a group or device name: 1 to 128 characters, no control characters")
                }
                tree.apps[app, default: App()].values[scope] = try TreeYAML.document(try text(), file: path)
            case ("policies", 3) where last.hasSuffix(".yaml"):
                guard let scope = PolicyScope("\(parts[1]):\(name)") else {
                    throw TreeError(file: path, "not a file of a settings tree: \(layout)")
                }
                tree.policies[scope] = try TreeYAML.document(try text(), file: path, allowSecrets: false).values
            case ("groups", 2) where last.hasSuffix(".yaml"):
                tree.groups[name] = try groupConditions(try text(), file: path)
            default:
                throw TreeError(file: path, "not a file of a settings tree: \(layout)")
            }
        }
        return tree
    }

    /// The conditions of a group file: `where:` and a list of `NAME=VALUE`, `NAME!=VALUE` or
    /// `NAME~REGEX` texts.
    static func groupConditions(_ text: String, file: String) throws(TreeError) -> [String] {
        let document = try TreeYAML.document(text, file: file, allowSecrets: false)
        guard document.values.keys == ["where"], case .array(let items)? = document.values["where"] else {
            throw TreeError(file: file, "a group file holds one key, where, with the list of its conditions (- machine.arch=aarch64)")
        }
        return try items.map { item throws(TreeError) in
            guard case .string(let condition) = item, condition.contains("=") || condition.contains("~") else {
                throw TreeError(file: file, "each condition is a text NAME=VALUE, NAME!=VALUE or NAME~REGEX")
            }
            return condition
        }
    }

    /// Reads the tree in `directory`.
    ///
    /// - Throws: ``TreeError`` for a file that cannot be read or is not right (its path relative
    ///   to `directory`).
    public static func read(directory: String) throws(TreeError) -> SettingsTree {
        let paths: [String]
        do {
            paths = try FileSystem.regularFiles(under: directory)
        } catch {
            throw TreeError(file: directory, "cannot be read: \(error)")
        }
        var files: [String: [UInt8]] = [:]
        for path in paths where isTreeFile(path) {
            do {
                files[path] = try FileSystem.readFile(directory + "/" + path)
            } catch {
                throw TreeError(file: path, "cannot be read: \(error)")
            }
        }
        return try read(files: files)
    }

    /// Writes the tree into `directory`: every file of ``files`` whose bytes differ, and the
    /// tree files there that the tree no longer has are removed (so the folder holds exactly
    /// the tree; other files are left alone). Returns the paths written and removed.
    ///
    /// - Throws: `FileError` for a file or folder that cannot be written.
    @discardableResult
    public func write(to directory: String) throws -> (written: [String], removed: [String]) {
        let wanted = files
        try FileSystem.makeDirectories(directory)
        let present = try FileSystem.regularFiles(under: directory).filter(Self.isTreeFile)
        var removed: [String] = []
        for path in present where wanted[path] == nil {
            try FileSystem.removeFile(directory + "/" + path)
            removed.append(path)
        }
        var written: [String] = []
        for path in wanted.keys.sorted() {
            let full = directory + "/" + path
            if let bytes = try FileSystem.readFileIfPresent(full), bytes == wanted[path] { continue }
            try FileSystem.makeDirectories(FileSystem.parentDirectory(of: full))
            try FileSystem.writeAtomically(wanted[path] ?? [], to: full, mode: 0o644)
            written.append(path)
        }
        return (written, removed)
    }
}
