import ArgumentParser
import FleetClient
import FleetIO
import FleetJSON
import FleetMetadata
import FleetProtocol
import FleetSchema
import FleetSettingsAsCode

#if canImport(Glibc)
import Glibc
#endif

/// `fleetset admin export DIR [--app A]…`: the server's settings as a tree of files.
struct AdminExport: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Write apps' metadata, values per scope, agent policies and groups as a tree of files (settings as code).",
        discussion: """
            Per app: apps/APP/metadata.json as the server has it, and one YAML file per scope that \
            holds values (values/app.yaml, values/group/NAME.yaml, values/device/ID.yaml); \
            policies/{app,group,device}/NAME.yaml; groups/NAME.yaml. A secret is written as a \
            reference, !secret APP/KEYPATH, never its value. Files of the tree the server no longer \
            has are removed; other files are left alone. With --app, only those apps (and their app \
            policies) are written and the rest of the tree is kept. See docs/admins/settings-as-code.md.
            """)

    @OptionGroup var server: ServerOptions

    @Argument(help: "The tree's folder (made when missing).")
    var directory: String

    @Option(name: .customLong("app"), help: "Only this app (repeatable; default: every app the token may read).")
    var apps: [String] = []

    func run() async throws {
        var tree = SettingsTree()
        if !apps.isEmpty {
            do {
                tree = try SettingsTree.read(directory: directory)
            } catch let error where error.file == directory {
                tree = SettingsTree()  // a new folder
            } catch {
                StandardError.write("fleetset admin export: \(error)")
                throw CLIExit.invalidInput
            }
        }
        let only = apps
        let exported = try await server.withClient { client in try await TreeSession.export(client, apps: only) }
        if only.isEmpty {
            tree = exported
        } else {
            for app in only {
                tree.apps[app] = exported.apps[app]
                tree.policies[.app(app)] = exported.policies[.app(app)]
            }
        }
        let outcome: (written: [String], removed: [String])
        do {
            outcome = try tree.write(to: directory)
        } catch {
            StandardError.write("fleetset admin export: \(error)")
            throw CLIExit.usageOrIO
        }
        print(
            TerminalText.escaped(
                "\(directory): \(tree.apps.count) app(s), \(tree.files.count) file(s); \(outcome.written.count) written, \(outcome.removed.count) removed"
            ))
    }
}

/// `fleetset admin plan DIR`: what `apply` would change; exit 0 nothing, 2 something, 1 error.
struct AdminPlan: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "plan",
        abstract: "Show what apply would change, scope by scope and key by key (exit 0: nothing, 2: changes, 1: error).",
        discussion: """
            Reads the tree, reads the server, and asks the server to check the values as apply \
            would write them (a dry run: nothing is written). Prints per app and scope each place \
            that changes (~ changed, + added, - removed) with the devices the scope reaches, the \
            server's validation errors, policy and group changes. Exit status 0 when nothing would \
            change, 2 when something would (a drift check in CI), 1 on any error, usage included.
            """)

    @OptionGroup var server: ServerOptions
    @OptionGroup var tree: TreeOptions

    func run() async throws {
        let changes: Bool
        do {
            let plan = try await tree.plan(server)
            server.output(plan.json) { plan.text }
            guard plan.errors.isEmpty else { throw CLIExit.invalidInput }
            changes = plan.hasChanges
        } catch {
            if !(error is ExitCode) { StandardError.write("fleetset admin plan: \(error)") }
            throw ExitCode(1)
        }
        if changes { throw ExitCode(2) }
    }
}

/// `fleetset admin apply DIR`: makes the server match the tree.
struct AdminApply: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apply",
        abstract: "Make the server match the tree: metadata, values, agent policies, groups.",
        discussion: """
            Plans first (as fleetset admin plan) and writes nothing when the plan has an error. \
            Then the groups defined by a query; per app, a metadata document with a higher version \
            is stored, and the values of every scope that changes are written as one change (one \
            history entry, all scopes or none), refused with 409 when the app changed since the \
            plan; then the policies. \
            Without --prune only what the tree has is added or changed; with it, scopes, settings, \
            policy keys and groups the tree lacks are removed. --rollout stages an app's change when \
            it writes one scope (the app's or a group's). A second apply of the same tree writes \
            nothing.
            """)

    @OptionGroup var server: ServerOptions
    @OptionGroup var tree: TreeOptions
    @OptionGroup var change: ChangeOptions

    func validate() throws {
        if change.force { throw ValidationError("apply does not force past a rollout: abort it, or apply without the settings it stages") }
    }

    func run() async throws {
        let plan = try await tree.plan(server)
        guard plan.errors.isEmpty else {
            StandardError.write(plan.text)
            StandardError.write("fleetset admin apply: nothing written: the plan has errors")
            throw CLIExit.invalidInput
        }
        guard plan.hasChanges else {
            print("Nothing to apply: the server matches the tree.")
            return
        }
        var staging: ApplyRequest.Staging?
        if let waves = change.rollout {
            staging = ApplyRequest.Staging(
                waves: waves, pauseOnErrorsBasisPoints: try change.threshold(), waveWaitSeconds: try change.waveWaitSeconds())
        }
        let message = change.message
        let lines = try await server.withClient { client in try await plan.apply(client, message: message, rollout: staging) }
        for line in lines { print(TerminalText.escaped(line)) }
    }
}

/// The tree, and how to read it: shared by `plan` and `apply`.
struct TreeOptions: ParsableArguments {
    @Argument(help: "The tree's folder (as fleetset admin export writes it).")
    var directory: String

    @Option(
        name: .customLong("app"), help: "Only this app of the tree (repeatable); policies of other scopes and groups are then left out.")
    var apps: [String] = []

    @Flag(help: "Remove what the tree lacks: scopes, settings, policy keys, groups.")
    var prune = false

    @Option(help: "A folder of secrets: the file DIR/APP/KEYPATH holds the secret !secret APP/KEYPATH names.")
    var secrets: String?

    /// The tree, read; an error names the file and place.
    func read() throws -> SettingsTree {
        do {
            var tree = try SettingsTree.read(directory: directory)
            if let missing = apps.first(where: { tree.apps[$0] == nil }) {
                throw TreeError(file: directory, "the tree has no app \(missing) (no apps/\(SettingsTree.fileName(missing))/)")
            }
            if !apps.isEmpty {
                tree.apps = tree.apps.filter { apps.contains($0.key) }
                tree.policies = tree.policies.filter { if case .app(let app) = $0.key { apps.contains(app) } else { false } }
                tree.groups = [:]
            }
            return tree
        } catch {
            StandardError.write("fleetset admin: \(error)")
            throw CLIExit.invalidInput
        }
    }

    /// The plan of the tree against the server.
    func plan(_ server: ServerOptions) async throws -> TreeSession.Plan {
        let tree = try read()
        let source = SecretSource(directory: secrets)
        let prune = prune
        let only = apps
        return try await server.withClient { client in
            try await TreeSession.plan(client, tree: tree, prune: prune, secrets: source, onlyApps: only)
        }
    }
}

/// Where a `!secret APP/KEYPATH` reference is resolved: the file `DIR/APP/KEYPATH` of
/// `--secrets DIR`, else the environment variable `FLEETSET_SECRET_` + the reference upper-cased
/// with every character other than a letter or digit as `_` (`kiosk/operatorPassword` →
/// `FLEETSET_SECRET_KIOSK_OPERATORPASSWORD`). The text is read by the setting's schema as
/// `admin set` reads a VALUE; a file's one final line break is dropped.
struct SecretSource: Sendable {
    let directory: String?

    /// The variable a reference is read from.
    static func environmentName(_ reference: String) -> String {
        "FLEETSET_SECRET_"
            + String(
                reference.uppercased().unicodeScalars.map { ("A"..."Z").contains($0) || ("0"..."9").contains($0) ? Character($0) : "_" })
    }

    /// The secret's text, or `nil` when neither the folder nor the environment has it.
    func text(_ reference: String) throws -> String? {
        let parts = reference.split(separator: "/", omittingEmptySubsequences: false)
        guard !reference.hasPrefix("/"), !parts.contains(where: { $0.isEmpty || $0 == "." || $0 == ".." }) else {
            throw TreeSession.Failure("!secret \(reference): a reference is APP/KEYPATH, without empty, . or .. parts")
        }
        if let directory, let bytes = try FileSystem.readFileIfPresent(directory + "/" + reference) {
            var text = String(decoding: bytes, as: UTF8.self)
            if text.hasSuffix("\n") { text.removeLast() }
            return text
        }
        return getenv(Self.environmentName(reference)).map { String(cString: $0) }
    }
}

/// Export, plan and apply against one server.
enum TreeSession {
    /// A problem that is not the server's: said as it is.
    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    /// What the server holds of one app.
    struct StoredApp {
        let document: [UInt8]
        let metadata: Metadata
        let scopes: AppScopes
        let devices: [DeviceSummary]

        var values: [Scope: JSONObject] {
            Dictionary(uniqueKeysWithValues: scopes.scopes.compactMap { part in Scope(parameter: part.scope).map { ($0, part.values) } })
        }
    }

    /// The app as the server has it; `nil` when it has no such app.
    static func stored(_ client: FleetClient, app: String) async throws -> StoredApp? {
        let document: [UInt8]
        do {
            document = try await client.storedMetadata(app: app)
        } catch let error as FleetClientError where error.code == .unknownApp {
            return nil
        }
        let metadata: Metadata
        do {
            metadata = try Metadata(json: document)
        } catch {
            throw Failure("the server's metadata of \(app) cannot be read: \(error)")
        }
        return StoredApp(
            document: document, metadata: metadata, scopes: try await client.scopes(app: app),
            devices: try await client.devices(app: app).devices)
    }

    /// The places of `values` (masked) that hold a secret: what the schema marks, and a
    /// device's key-path values shown masked.
    static func secretPlaces(_ values: JSONObject, metadata: Metadata?) -> Set<String> {
        var places = Set((metadata?.schema.secretLocations(in: .object(values)) ?? []).map(\.description))
        for (key, value) in values where KeyPathValues.isKeyPath(key) && value == SettingsValues.mask {
            places.insert(JSONPointer.root.appending(key).description)
        }
        return places
    }

    /// The server's settings as a tree: every app (or `apps`), its scopes with secrets as
    /// references, the agent policies (with `apps`, only theirs), the group definitions.
    static func export(_ client: FleetClient, apps only: [String]) async throws -> SettingsTree {
        var tree = SettingsTree()
        let apps = only.isEmpty ? try await client.apps().apps.map(\.app) : only
        for app in apps {
            guard let stored = try await stored(client, app: app) else { throw Failure("the server has no app \(app)") }
            var part = SettingsTree.App(metadata: stored.document)
            for (scope, values) in stored.values {
                var document = TreeDocument(values: values)
                for place in secretPlaces(values, metadata: stored.metadata) {
                    guard let pointer = JSONPointer(place), JSONValue.object(values)[pointer: pointer] == SettingsValues.mask else {
                        continue
                    }
                    document.secrets[place] = "\(app)/\(pointer.keyPath)"
                }
                part.values[scope] = document
            }
            tree.apps[app] = part
        }
        for (scope, policy) in try await client.policies().policies {
            guard included(scope, only: only) else { continue }
            if case .object(let keys) = policy.json, !keys.isEmpty { tree.policies[scope] = keys }
        }
        if only.isEmpty { tree.groups = try await GroupDefinitions.stored(client) }
        return tree
    }

    /// One scope's part of a plan.
    struct ScopePlan {
        let scope: Scope
        let changes: [ValueChange]
        /// The devices the scope reaches now.
        let reach: [String]
        let removed: Bool
        let new: Bool
    }

    /// One app's part of a plan.
    struct AppPlan {
        let app: String
        let metadataFile: String
        let metadataStep: MetadataStep
        let metadataDocument: [UInt8]?
        var scopes: [ScopePlan]
        /// What apply sends (the secrets resolved in it; never printed).
        let request: ApplyRequest
        /// The server's dry run (`nil`: not asked, the metadata changes first or the app is new).
        let checked: ApplyResult?
        var errors: [String]

        var hasChanges: Bool {
            if case .upload = metadataStep { return true }
            return !scopes.isEmpty
        }
    }

    /// A policy's part of a plan.
    struct PolicyPlan {
        let scope: PolicyScope
        let changes: [ValueChange]
        let patch: JSONObject
        /// The devices the scope's policy reaches now.
        let reach: [String]
    }

    /// A group's part of a plan: its conditions before (`nil`: new) and after (`nil`: removed).
    struct GroupPlan {
        let name: String
        let old: [String]?
        let new: [String]?
        /// The devices the group would have (`new`'s query) now.
        var reach: [String] = []
    }

    /// What apply would do.
    struct Plan {
        var apps: [AppPlan] = []
        var policies: [PolicyPlan] = []
        var groups: [GroupPlan] = []

        var errors: [String] { apps.flatMap(\.errors) }
        var hasChanges: Bool { apps.contains(where: \.hasChanges) || !policies.isEmpty || !groups.isEmpty }

        /// The plan for a person, one change a line.
        var text: String {
            var lines: [String] = []
            for app in apps where app.hasChanges || !app.errors.isEmpty {
                lines.append(app.app)
                switch app.metadataStep {
                case .upload(let from, let to):
                    lines.append("  metadata: version \(from.map(String.init) ?? "none") → \(to) (\(app.metadataFile))")
                    if app.checked == nil && !app.scopes.isEmpty {
                        lines.append("  (values are checked against version \(to) when it is stored)")
                    }
                case .refused, .unchanged: break
                }
                for scope in app.scopes {
                    let shown = Self.shown(scope.reach)
                    let state = scope.removed ? " (removed)" : scope.new ? " (new)" : ""
                    lines.append(
                        "  \(scope.scope)\(state): reaches \(scope.reach.count) device(s)\(scope.reach.isEmpty ? "" : ": " + shown)")
                    for change in scope.changes { lines.append("    " + change.line) }
                }
                for error in app.errors { lines.append("  ! " + error) }
            }
            if !policies.isEmpty {
                lines.append("policies")
                for policy in policies {
                    lines.append(
                        "  \(policy.scope): reaches \(policy.reach.count) device(s)\(policy.reach.isEmpty ? "" : ": " + Self.shown(policy.reach))"
                    )
                    for change in policy.changes { lines.append("    " + change.line) }
                }
            }
            if !groups.isEmpty {
                lines.append("groups")
                for group in groups {
                    let reach = " (\(group.reach.count) device(s) now\(group.reach.isEmpty ? "" : ": " + Self.shown(group.reach)))"
                    switch (group.old, group.new) {
                    case (nil, let new?): lines.append("  + \(group.name): where \(new.joined(separator: ", "))\(reach)")
                    case (_?, nil): lines.append("  - \(group.name) (its members leave it)")
                    case (let old?, let new?):
                        lines.append("  ~ \(group.name): where \(old.joined(separator: ", ")) → \(new.joined(separator: ", "))\(reach)")
                    default: break
                    }
                }
            }
            if !errors.isEmpty {
                lines.append("Errors: apply would write nothing.")
            } else if hasChanges {
                let scopes = apps.map(\.scopes.count).reduce(0, +)
                lines.append("Plan: \(scopes) scope(s) of values, \(policies.count) policy scope(s), \(groups.count) group(s) change.")
            } else {
                lines.append("No changes: the server matches the tree.")
            }
            return lines.map { TerminalText.escaped($0) }.joined(separator: "\n")
        }

        /// The first three ids of `devices`, and `…` for more.
        static func shown(_ devices: [String]) -> String {
            devices.prefix(3).joined(separator: ", ") + (devices.count > 3 ? ", …" : "")
        }

        /// The plan as JSON (`--json`): changes by place, secrets never with their values.
        var json: JSONValue {
            let change = { (change: ValueChange) -> JSONValue in
                var object: JSONObject = ["place": .string(change.place), "change": .string("\(change.kind)")]
                if !change.isSecret {
                    if let old = change.old { object["old"] = old }
                    if let new = change.new { object["new"] = new }
                } else {
                    object["secret"] = true
                }
                return .object(object)
            }
            return [
                "changes": .bool(hasChanges),
                "apps": .array(
                    apps.map { app in
                        var metadata: JSONValue = .null
                        if case .upload(let from, let to) = app.metadataStep {
                            metadata = ["from": from.map { .number(.integer(Int64($0))) } ?? .null, "to": .number(.integer(Int64(to)))]
                        }
                        return [
                            "app": .string(app.app), "metadata": metadata, "errors": .array(app.errors.map(JSONValue.string)),
                            "scopes": .array(
                                app.scopes.map {
                                    [
                                        "scope": .string($0.scope.description), "devices": .array($0.reach.map(JSONValue.string)),
                                        "changes": .array($0.changes.map(change)),
                                    ]
                                }),
                        ]
                    }),
                "policies": .array(
                    policies.map {
                        [
                            "scope": .string($0.scope.description), "devices": .array($0.reach.map(JSONValue.string)),
                            "changes": .array($0.changes.map(change)),
                        ]
                    }),
                "groups": .array(
                    groups.map {
                        [
                            "name": .string($0.name), "old": $0.old.map { .array($0.map(JSONValue.string)) } ?? .null,
                            "new": $0.new.map { .array($0.map(JSONValue.string)) } ?? .null,
                            "devices": .array($0.reach.map(JSONValue.string)),
                        ]
                    }),
            ]
        }

        /// Writes the plan: per app the metadata, then the values (one change); then the
        /// policies and the groups. Returns what was done, a line each.
        func apply(_ client: FleetClient, message: String, rollout: ApplyRequest.Staging?) async throws -> [String] {
            var lines: [String] = []
            for group in groups {
                if let new = group.new {
                    try await GroupDefinitions.put(client, name: group.name, where: new)
                    lines.append("group \(group.name): \(group.old == nil ? "created" : "changed")")
                } else {
                    try await GroupDefinitions.delete(client, name: group.name)
                    lines.append("group \(group.name): removed")
                }
            }
            for app in apps where app.hasChanges {
                var request = app.request
                if case .upload(_, let to) = app.metadataStep, let document = app.metadataDocument {
                    _ = try await client.putMetadata(app: app.app, document: document, message: message)
                    lines.append("\(app.app): metadata version \(to) stored")
                    // The upload is an entry of its own: the plan's base moves past it, and only it.
                    if let base = request.base, !request.scopes.isEmpty {
                        let newest = try await client.scopes(app: app.app).newest
                        guard newest == base + 1 else {
                            throw Failure("\(app.app) changed since the plan (history entry \(newest), the plan saw \(base)); plan again")
                        }
                        request.base = newest
                    }
                }
                guard !request.scopes.isEmpty else { continue }
                request.message = message
                request.rollout = rollout
                let result = try await client.apply(app: app.app, request)
                let scopes = result.changed.map(\.scope).joined(separator: ", ")
                if let rollout = result.rollout {
                    lines.append("\(app.app): rollout \(rollout) started at \(scopes) (fleetset admin rollout status \(app.app))")
                } else if let entry = result.entry {
                    lines.append("\(app.app): entry \(entry) written: \(scopes)")
                } else {
                    lines.append("\(app.app): the values were already as the tree says")
                }
            }
            for policy in policies {
                _ = try await client.patchPolicy(scope: policy.scope, policy.patch)
                lines.append("policy \(policy.scope): \(policy.patch.keys.sorted().joined(separator: ", "))")
            }
            return lines
        }
    }

    /// The plan of `tree` against the server.
    static func plan(_ client: FleetClient, tree: SettingsTree, prune: Bool, secrets: SecretSource, onlyApps: [String]) async throws -> Plan
    {
        var plan = Plan()
        for app in tree.apps.keys.sorted() {
            plan.apps.append(
                try await appPlan(client, app: app, part: tree.apps[app] ?? SettingsTree.App(), prune: prune, secrets: secrets))
        }
        // Policies: the tree's scopes, and with --prune every other (of the tree's apps only with --app).
        let stored = Dictionary(
            uniqueKeysWithValues: try await client.policies().policies.map { ($0.scope, $0.policy.json.objectValue ?? [:]) })
        var scopes = Set(tree.policies.keys)
        if prune {
            for scope in stored.keys {
                if included(scope, only: onlyApps) { scopes.insert(scope) }
            }
        }
        var devices: [DeviceRecord]?
        for scope in scopes.sorted() {
            let old = stored[scope] ?? [:]
            let patch = TreeDiff.policyPatch(stored: old, tree: tree.policies[scope] ?? [:], prune: prune)
            guard !patch.isEmpty else { continue }
            let new = SettingsValues.merged(old, patch)
            if devices == nil { devices = try await client.allDevices().devices }
            let reach = (devices ?? []).filter { device in
                switch scope {
                case .app(let app): device.apps.contains(app)
                case .group(let name): device.groups.contains(name)
                case .device(let id): device.id == id
                }
            }.map(\.id).sorted()
            plan.policies.append(PolicyPlan(scope: scope, changes: TreeDiff.changes(from: old, to: new), patch: patch, reach: reach))
        }
        // Groups: only when the whole tree is planned.
        if onlyApps.isEmpty {
            let storedGroups = try await GroupDefinitions.stored(client)
            for name in Set(tree.groups.keys).union(prune ? Set(storedGroups.keys) : []).sorted() {
                let old = storedGroups[name]
                // Each condition as the server writes it back, so that the same query compares equal.
                let written = try tree.groups[name].map { try GroupDefinitions.conditions($0, group: name).map(\.description) }
                let new = written ?? (prune ? nil : old)
                guard old != new else { continue }
                var group = GroupPlan(name: name, old: old, new: new)
                if let new { group.reach = try await GroupDefinitions.members(client, new, group: name) }
                plan.groups.append(group)
            }
        }
        return plan
    }

    /// One app's part of the plan.
    static func appPlan(_ client: FleetClient, app: String, part: SettingsTree.App, prune: Bool, secrets: SecretSource) async throws
        -> AppPlan
    {
        let stored = try await stored(client, app: app)
        let metadataFile = SettingsTree.metadataPath(app: app)
        let step = MetadataStep.step(tree: part.metadata, stored: stored?.document, file: metadataFile)
        var errors: [String] = []
        if case .refused(let why) = step { errors.append(why) }
        if stored == nil && part.metadata == nil {
            errors.append("the server has no app \(app), and the tree has no \(metadataFile) to make it")
        }
        var metadata = stored?.metadata
        if case .upload = step, let document = part.metadata {
            do {
                metadata = try Metadata(json: document)
            } catch {
                errors.append("\(metadataFile): not a metadata document fleetset accepts: \(error)")
            }
        }
        let storedValues = stored?.values ?? [:]
        var scopes: [ScopePlan] = []
        var parts: [ApplyRequest.ScopeValues] = []
        var targets = Set(part.values.keys)
        if prune { targets.formUnion(storedValues.keys) }
        for scope in targets.sorted(by: { $0.description.utf8.lexicographicallyPrecedes($1.description.utf8) }) {
            let old = storedValues[scope] ?? [:]
            let document = part.values[scope] ?? TreeDocument()
            var resolved: [String: JSONValue] = [:]
            for (place, reference) in document.secrets.sorted(by: { $0.key < $1.key }) {
                // A reference names its own place of this app, and only a place the metadata
                // keeps secret: anywhere else the secret would be stored and served in clear.
                guard let pointer = JSONPointer(place), reference == "\(app)/\(pointer.keyPath)" else {
                    errors.append(
                        "!secret \(reference) at \(scope) \(place): a reference names its own place, !secret \(app)/\(JSONPointer(place)?.keyPath ?? place)"
                    )
                    continue
                }
                if let metadata, !metadata.isSecret(at: pointer) {
                    errors.append("!secret \(reference) at \(scope) \(place): the metadata does not mark \(place) x-secret")
                    continue
                }
                guard let text = try secrets.text(reference) else { continue }
                guard let metadata else {
                    resolved[place] = .string(text)
                    continue
                }
                do {
                    resolved[place] = try metadata.readValue(text, at: pointer)
                } catch {
                    errors.append("!secret \(reference) at \(scope) \(place): \(error)")
                }
            }
            var desired = TreeDiff.desired(stored: old, tree: document, prune: prune, resolved: Set(resolved.keys))
            // A secret the server holds and the tree does not mention stays (the stored values
            // read back masked: sent as they are, the mask would replace the secret).
            for place in secretPlaces(old, metadata: metadata) where resolved[place] == nil && !desired.keep.contains(place) {
                guard let pointer = JSONPointer(place), let kept = JSONValue.object(old)[pointer: pointer],
                    JSONValue.object(desired.values)[pointer: pointer] == kept
                else { continue }
                desired.keep.append(place)
            }
            desired.keep.sort()
            let places = secretPlaces(old, metadata: metadata).union(secretPlaces(desired.values, metadata: metadata)).union(
                document.secrets.keys)
            let changes = TreeDiff.changes(from: old, to: desired.values, secretPlaces: places)
            guard !changes.isEmpty || !resolved.isEmpty else { continue }
            var values = JSONValue.object(desired.values)
            for (place, value) in resolved {
                if let pointer = JSONPointer(place), let set = try? values.setting(value, at: pointer) { values = set }
            }
            parts.append(ApplyRequest.ScopeValues(scope: scope.description, values: values.objectValue ?? [:], keep: desired.keep))
            scopes.append(
                ScopePlan(
                    scope: scope, changes: changes, reach: reach(of: scope, devices: stored?.devices ?? []),
                    removed: desired.values.isEmpty && !old.isEmpty, new: old.isEmpty))
        }
        let request = ApplyRequest(scopes: parts, base: stored?.scopes.newest)
        var checked: ApplyResult?
        if stored != nil, case .unchanged = step, errors.isEmpty, !parts.isEmpty {
            do {
                checked = try await client.apply(app: app, request, dryRun: true)
            } catch let error as FleetClientError where error.status == 422 || error.status == 400 || error.status == 409 {
                errors.append("\(error)")
            }
        }
        if let checked {
            // Only what the server would change; a secret it finds changed gets its line here.
            let changed = Dictionary(uniqueKeysWithValues: checked.changed.map { ($0.scope, $0.keys) })
            scopes = scopes.compactMap { scope in
                guard let keys = changed[scope.scope.description] else { return nil }
                var changes = scope.changes
                for key in keys where !changes.contains(where: { JSONPointer($0.place)?.tokens.first == key }) {
                    changes.append(ValueChange(place: JSONPointer.root.appending(key).description, kind: .changed, isSecret: true))
                }
                return ScopePlan(scope: scope.scope, changes: changes, reach: scope.reach, removed: scope.removed, new: scope.new)
            }
        }
        return AppPlan(
            app: app, metadataFile: metadataFile, metadataStep: step, metadataDocument: part.metadata, scopes: scopes,
            request: request, checked: checked, errors: errors)
    }

    /// Whether a policy scope is part of a tree limited to `only` apps (all when empty): with
    /// apps named, only their app scopes.
    static func included(_ scope: PolicyScope, only: [String]) -> Bool {
        guard !only.isEmpty else { return true }
        if case .app(let app) = scope { return only.contains(app) }
        return false
    }

    /// The ids of the devices `scope` reaches, sorted.
    static func reach(of scope: Scope, devices: [DeviceSummary]) -> [String] {
        switch scope {
        case .defaults, .app: devices.map(\.id).sorted()
        case .group(let name): devices.filter { $0.groups.contains(name) }.map(\.id).sorted()
        case .device(let id): devices.contains { $0.id == id } ? [id] : []
        }
    }
}

/// The server's groups defined by a query on the devices' facts (`GET /v1/admin/groups`, `PUT`
/// and `DELETE /v1/admin/groups/{name}`): the tree's `groups/NAME.yaml`. Groups whose devices
/// were put in them by hand have no query and are not part of the tree.
enum GroupDefinitions {
    /// Every defined group's conditions by name, as text (`machine.arch=aarch64`).
    static func stored(_ client: FleetClient) async throws -> [String: [String]] {
        var groups: [String: [String]] = [:]
        for group in try await client.groups().groups {
            if let conditions = group.conditions { groups[group.name] = conditions.map(\.description) }
        }
        return groups
    }

    /// The conditions of `texts`, each read as the server reads it.
    ///
    /// - Throws: ``TreeSession/Failure`` naming the group's file and the condition.
    static func conditions(_ texts: [String], group name: String) throws -> [DeviceInfoFilter] {
        try texts.map { text in
            do {
                return try DeviceInfoFilter(parsing: text)
            } catch {
                throw TreeSession.Failure("\(SettingsTree.groupPath(name)): \(error)")
            }
        }
    }

    /// The devices a group with `texts` as its query would have now, by id.
    static func members(_ client: FleetClient, _ texts: [String], group name: String) async throws -> [String] {
        try await client.allDevices(where: try conditions(texts, group: name)).devices.map(\.id).sorted()
    }

    /// Defines a group, or replaces its query.
    static func put(_ client: FleetClient, name: String, where texts: [String]) async throws {
        _ = try await client.defineGroup(name: name, where: try conditions(texts, group: name))
    }

    /// Removes a group's query: its members leave it.
    static func delete(_ client: FleetClient, name: String) async throws {
        try await client.removeGroupDefinition(name: name)
    }
}
