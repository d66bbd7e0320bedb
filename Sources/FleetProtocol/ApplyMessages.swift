import FleetJSON

/// `POST /v1/admin/apps/{app}/apply`: the whole values of several scopes of one app, written
/// as one change (one history entry) or not at all (`fleetset admin apply`).
///
/// Each scope's ``ScopeValues/values`` replace what the scope holds (an empty object removes
/// them all); the places in ``ScopeValues/keep`` keep their stored value (secrets the client
/// does not know: the value sent there is ignored, and a place the scope holds nothing at is
/// left out). Scopes whose values come out as they are stored are not written; when none
/// changes, nothing is written at all.
public struct ApplyRequest: Sendable, Hashable {
    /// One scope's values to set.
    public struct ScopeValues: Sendable, Hashable {
        /// `app`, `group:NAME` or `device:ID`.
        public var scope: String
        /// The scope's whole values.
        public var values: JSONObject
        /// JSON pointers of places inside ``values`` whose stored value is kept.
        public var keep: [String]

        /// Creates one scope's part.
        public init(scope: String, values: JSONObject, keep: [String] = []) {
            self.scope = scope
            self.values = values
            self.keep = keep
        }

        /// Reads one scope's part at `location`.
        public init(json: JSONValue, at location: JSONPointer) throws(DocumentError) {
            let reader = try ObjectReader(json, at: location, allowed: ["scope", "values", "keep"])
            scope = try reader.string("scope", maximumLength: 256)
            values = try reader.values("values")
            keep =
                reader.object["keep"] == nil
                ? []
                : try reader.array("keep") { value, pointer throws(DocumentError) in
                    guard case .string(let text) = value, JSONPointer(text) != nil, !text.isEmpty else {
                        throw DocumentError(at: pointer, "must be a JSON pointer to a place inside the values, like /pin")
                    }
                    return text
                }
        }

        /// The wire form.
        public var json: JSONValue {
            ["scope": .string(scope), "values": .object(values), "keep": .array(keep.map(JSONValue.string))]
        }
    }

    /// How to stage the change instead of writing it at once (see ``RolloutRequest``): allowed
    /// when the change writes one scope, the app's or a group's.
    public struct Staging: Sendable, Hashable {
        /// The waves (``RolloutRequest/waves``).
        public var waves: [RolloutWave]
        /// The pause threshold in basis points (``RolloutRequest/pauseOnErrorsBasisPoints``).
        public var pauseOnErrorsBasisPoints: Int
        /// How long each wave has to report (``RolloutRequest/waveWaitSeconds``).
        public var waveWaitSeconds: Int64

        /// Creates the staging; the defaults are a rollout's.
        public init(
            waves: [RolloutWave], pauseOnErrorsBasisPoints: Int = RolloutRequest.defaultPauseOnErrors,
            waveWaitSeconds: Int64 = RolloutRequest.defaultWaveWait
        ) {
            self.waves = waves
            self.pauseOnErrorsBasisPoints = pauseOnErrorsBasisPoints
            self.waveWaitSeconds = waveWaitSeconds
        }
    }

    /// The scopes to set, each at most once.
    public var scopes: [ScopeValues]
    /// The app's newest history entry as the client saw it when it made the request (its plan):
    /// the server refuses the request with 409 `concurrent-write` when the app has a newer one. `nil`:
    /// not checked.
    public var base: Int64?
    /// Why, kept in the app's history (at most 1,024 characters); may be empty.
    public var message: String
    /// Stage the change in waves (`nil`: write it at once).
    public var rollout: Staging?

    /// Creates a request.
    public init(scopes: [ScopeValues], base: Int64? = nil, message: String = "", rollout: Staging? = nil) {
        self.scopes = scopes
        self.base = base
        self.message = message
        self.rollout = rollout
    }

    /// Reads the wire form; unknown members are refused, each problem at its pointer.
    public init(json: JSONValue) throws(DocumentError) {
        let reader = try ObjectReader(json, allowed: ["scopes", "base", "message", "rollout"])
        scopes = try reader.array("scopes") { value, pointer throws(DocumentError) in try ScopeValues(json: value, at: pointer) }
        base = try reader.nullableCount("base")
        message = try reader.optionalString("message", maximumLength: 1024) ?? ""
        if let staging = reader.object["rollout"], staging != .null {
            // The rollout's own reader, with a stand-in scope and patch.
            guard case .object(var object) = staging else {
                throw DocumentError(at: JSONPointer.root.appending("rollout"), "must be an object")
            }
            for key in ["scope", "patch"] where object[key] != nil {
                throw DocumentError(at: JSONPointer.root.appending("rollout").appending(key), "is not a member of this message")
            }
            object["scope"] = "app"
            object["patch"] = ["-": true]
            do {
                let read = try RolloutRequest(json: .object(object))
                rollout = Staging(
                    waves: read.waves, pauseOnErrorsBasisPoints: read.pauseOnErrorsBasisPoints, waveWaitSeconds: read.waveWaitSeconds)
            } catch {
                throw DocumentError(at: JSONPointer(tokens: ["rollout"] + error.location.tokens), error.message)
            }
        }
    }

    /// The wire form.
    public var json: JSONValue {
        var object: JSONObject = ["scopes": .array(scopes.map(\.json)), "message": .string(message)]
        if let base { object["base"] = .number(.integer(base)) }
        if let rollout {
            object["rollout"] = [
                "waves": .array(rollout.waves.map { .string($0.description) }),
                "pauseOnErrorsPercent": .number(.double(Double(rollout.pauseOnErrorsBasisPoints) / 100)),
                "waveWaitSeconds": .number(.integer(rollout.waveWaitSeconds)),
            ]
        }
        return .object(object)
    }
}

/// The answer to ``ApplyRequest``: what changed (or, with `dryRun`, would change), never a value.
public struct ApplyResult: Sendable, Hashable {
    /// One scope that changes.
    public struct ScopeChange: Sendable, Hashable {
        /// `app`, `group:NAME` or `device:ID`.
        public var scope: String
        /// The settings (top-level names) whose values change, sorted: secrets included, by name only.
        public var keys: [String]

        /// Creates one scope's change.
        public init(scope: String, keys: [String]) {
            self.scope = scope
            self.keys = keys
        }

        /// The wire form.
        public var json: JSONValue { ["scope": .string(scope), "keys": .array(keys.map(JSONValue.string))] }
    }

    /// The app id.
    public var app: String
    /// Whether this was a dry run: checked as the write would be, nothing written.
    public var dryRun: Bool
    /// The scopes that change, by their text.
    public var changed: [ScopeChange]
    /// The history entry written (`nil`: nothing written — a dry run, nothing to change, or a rollout).
    public var entry: Int64?
    /// The rollout started (`nil`: none).
    public var rollout: String?

    /// Creates an answer.
    public init(app: String, dryRun: Bool, changed: [ScopeChange], entry: Int64? = nil, rollout: String? = nil) {
        self.app = app
        self.dryRun = dryRun
        self.changed = changed
        self.entry = entry
        self.rollout = rollout
    }

    /// Reads the wire form; unknown members are refused.
    public init(json: JSONValue) throws(DocumentError) {
        let reader = try ObjectReader(json, allowed: ["app", "dryRun", "changed", "entry", "rollout"])
        app = try reader.string("app", maximumLength: 64)
        dryRun = try reader.optionalBool("dryRun") ?? false
        changed = try reader.array("changed") { value, pointer throws(DocumentError) in
            let scope = try ObjectReader(value, at: pointer, allowed: ["scope", "keys"])
            return ScopeChange(
                scope: try scope.string("scope", maximumLength: 256),
                keys: try scope.array("keys") { key, at throws(DocumentError) in
                    guard case .string(let name) = key else { throw DocumentError(at: at, "must be a string") }
                    return name
                })
        }
        entry = try reader.nullableCount("entry")
        rollout = try reader.object["rollout"] == .null ? nil : reader.optionalString("rollout", maximumLength: 64)
    }

    /// The wire form.
    public var json: JSONValue {
        [
            "app": .string(app), "dryRun": .bool(dryRun), "changed": .array(changed.map(\.json)),
            "entry": entry.map { .number(.integer($0)) } ?? .null, "rollout": rollout.map(JSONValue.string) ?? .null,
        ]
    }
}

/// `GET /v1/admin/apps`: the apps the caller may read, with their metadata's version.
public struct AppList: Sendable, Hashable {
    /// One app.
    public struct Entry: Sendable, Hashable {
        /// The app id.
        public var app: String
        /// Its stored metadata's version.
        public var version: Int64

        /// Creates an entry.
        public init(app: String, version: Int64) {
            self.app = app
            self.version = version
        }
    }

    /// The apps, sorted by id.
    public var apps: [Entry]

    /// Creates a list.
    public init(apps: [Entry]) { self.apps = apps }

    /// Reads the wire form; unknown members are refused.
    public init(json: JSONValue) throws(DocumentError) {
        let reader = try ObjectReader(json, allowed: ["apps"])
        apps = try reader.array("apps") { value, pointer throws(DocumentError) in
            let entry = try ObjectReader(value, at: pointer, allowed: ["app", "version"])
            return Entry(app: try entry.string("app", maximumLength: 64), version: try entry.count("version"))
        }
    }

    /// The wire form.
    public var json: JSONValue {
        ["apps": .array(apps.map { ["app": .string($0.app), "version": .number(.integer($0.version))] })]
    }
}

/// `GET /v1/admin/apps/{app}/scopes`: the values of every scope of an app that holds any
/// (secrets masked), and the app's newest history entry, read before them: what a plan is
/// made from, and the `base` of its ``ApplyRequest``.
public struct AppScopes: Sendable, Hashable {
    /// The app id.
    public var app: String
    /// The app's newest history entry (0: none).
    public var newest: Int64
    /// Each scope that holds values (the caller's scope permitting), sorted by scope.
    public var scopes: [ScopedValues]

    /// Creates the scopes of an app.
    public init(app: String, newest: Int64, scopes: [ScopedValues]) {
        self.app = app
        self.newest = newest
        self.scopes = scopes
    }

    /// Reads the wire form; unknown members are refused.
    public init(json: JSONValue) throws(DocumentError) {
        let reader = try ObjectReader(json, allowed: ["app", "newest", "scopes"])
        app = try reader.string("app", maximumLength: 64)
        newest = try reader.count("newest")
        scopes = try reader.array("scopes") { value, _ throws(DocumentError) in try ScopedValues(json: value) }
    }

    /// The wire form.
    public var json: JSONValue {
        ["app": .string(app), "newest": .number(.integer(newest)), "scopes": .array(scopes.map(\.json))]
    }
}
