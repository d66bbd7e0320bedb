import FleetJSON
import FleetProtocol
import FleetServerCore
import Logging
import PostgresNIO

/// One change notification as sent on ``PostgresStore/changeChannel``: a JSON object naming
/// the instance that made the change and what changed, e.g.
/// `{"from":"9f2c…","app":"kiosk","scope":"group:lobby"}` or `{"from":"9f2c…","device":"d-1"}`
/// (at most a few hundred bytes: app ids, group names and device ids are short).
struct ChangeMessage: Sendable, Hashable {
    let from: String
    let change: StoreChange

    var payload: String {
        var object: JSONObject = ["from": .string(from)]
        switch change {
        case .values(let app, let scope):
            object["app"] = .string(app)
            object["scope"] = .string(scope.description)
        case .device(let id):
            object["device"] = .string(id)
        case .policy(let scope):
            object["policy"] = .string(scope.description)
        case .unknown:
            object["unknown"] = .bool(true)
        }
        return JSONValue.object(object).serialized()
    }

    init(from: String, change: StoreChange) {
        self.from = from
        self.change = change
    }

    /// Reads a payload; `nil` for one fleetset did not send. `from`: the origin when the payload
    /// does not name it (a row of the change feed, whose origin is a column of its own).
    init?(payload: String, from origin: String? = nil) {
        guard case .object(let object)? = try? JSONParser.parse(payload) else { return nil }
        guard case .string(let from)? = object["from"] ?? origin.map(JSONValue.string) else { return nil }
        self.from = from
        if case .string(let app)? = object["app"], case .string(let scopeText)? = object["scope"] {
            guard let scope = scopeText == "defaults" ? .defaults : Scope(parameter: scopeText) else { return nil }
            change = .values(app: app, scope: scope)
        } else if case .string(let device)? = object["device"] {
            change = .device(device)
        } else if case .string(let scopeText)? = object["policy"] {
            guard let scope = PolicyScope(scopeText) else { return nil }
            change = .policy(scope)
        } else if case .bool(true)? = object["unknown"] {
            change = .unknown
        } else {
            return nil
        }
    }
}

/// Which rows of the change feed an instance has seen: every id up to ``floor``, and those in
/// `seen` above it. Ids are drawn when a row is inserted but become visible when its
/// transaction commits, so a later id can show up first: a missing id is waited for (its
/// transaction's own NOTIFY brings the reader back) for ``gapPatience``, then given up on, and
/// the reader is told (``Taken/gaveUp``): the row may still commit later than that (a stalled
/// commit), so the instance forgets what it kept rather than risk missing it. Pure: the caller
/// gives the time.
public struct ChangeFeedCursor<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration, Instant: Sendable {
    /// How long a missing id is waited for.
    public static var gapPatience: Duration { .seconds(10) }

    /// Every id up to this one is settled (seen, or given up on).
    public private(set) var floor: Int64
    private var seen: Set<Int64> = []
    private var gaps: [Int64: Instant] = [:]

    public init(after floor: Int64) {
        self.floor = floor
    }

    /// What ``take(_:now:)`` found.
    public struct Taken: Sendable, Hashable {
        /// The ids not seen before, in order.
        public var new: [Int64]
        /// Whether a missing id was given up on.
        public var gaveUp: Bool

        public init(new: [Int64], gaveUp: Bool) {
            self.new = new
            self.gaveUp = gaveUp
        }
    }

    /// The highest id seen (``floor`` when none above it).
    public var highest: Int64 { seen.max() ?? floor }

    /// The ids missing between ``floor`` and ``highest``: the rows to read again besides those
    /// above ``highest``.
    public var missing: [Int64] { gaps.keys.sorted() }

    /// Takes the ids of rows read; returns the ones not seen before, in order, and moves the
    /// floor up over what is settled at `now`.
    public mutating func take(_ ids: [Int64], now: Instant) -> Taken {
        var new: [Int64] = []
        var gaveUp = false
        for id in ids.sorted() where id > floor && seen.insert(id).inserted {
            new.append(id)
            gaps[id] = nil
        }
        if let highest = seen.max() {
            for id in (floor + 1)..<highest where !seen.contains(id) && gaps[id] == nil { gaps[id] = now }
        }
        while true {
            let next = floor + 1
            if seen.remove(next) != nil {
                floor = next
            } else if let since = gaps[next], since.duration(to: now) >= Self.gapPatience {
                gaps[next] = nil
                floor = next
                gaveUp = true
            } else {
                break
            }
        }
        return Taken(new: new, gaveUp: gaveUp)
    }
}

extension PostgresStore {
    /// The changes recorded after row `id` of the feed (and those of the ids in `missing`), at
    /// most `limit`, oldest first, with each row's id and whether this instance made it.
    func feed(after id: Int64, missing: [Int64] = [], limit: Int = 1000, on connection: PostgresConnection) async throws -> [(
        id: Int64, change: StoreChange?, own: Bool
    )] {
        try await connection.query(
            "SELECT id, origin, change FROM change_feed WHERE id > \(id) OR id = ANY(\(missing)) ORDER BY id LIMIT \(Int64(limit))",
            logger: logger
        ).collect().map { row in
            let (id, origin, text) = try row.decode((Int64, String, String).self)
            return (id, ChangeMessage(payload: text, from: origin)?.change, origin == applicationName)
        }
    }

    /// Removes the feed's rows older than an hour (an instance away longer starts over with
    /// ``StoreChange/unknown`` anyway).
    func pruneFeed(on connection: PostgresConnection) async throws {
        try await connection.query("DELETE FROM change_feed WHERE at < extract(epoch FROM now())::bigint - 3600", logger: logger)
    }

    /// Hears the changes the other instances on this database make, and hands each to `handle`,
    /// until the calling task is cancelled. Its own changes it skips.
    ///
    /// The changes are rows of `change_feed`, written by triggers in each writing transaction;
    /// a notification on ``changeChannel`` (whatever it says, whoever sent it) only makes it
    /// read the rows after the last it saw. So a role that may connect to the database and
    /// sends notifications in a loop costs one indexed query each, never a flush of the caches.
    ///
    /// It listens on a connection of its own. When that connection is lost it connects again
    /// (waiting 0.1 s, doubling to 5 s), and since changes may have been missed meanwhile, each
    /// time it listens again it first hands `handle` ``StoreChange/unknown``.
    ///
    /// - Parameter onListening: called each time it listens (again).
    public func followChanges(
        onListening: @escaping @Sendable () -> Void = {}, _ handle: @escaping @Sendable (StoreChange) async -> Void
    ) async {
        var delay = Duration.milliseconds(100)
        var connectionID = 0
        let clock = ContinuousClock()
        while !Task.isCancelled {
            do {
                connectionID += 1
                let connection = try await PostgresConnection.connect(
                    configuration: try location.connectionConfiguration(), id: connectionID, logger: logger)
                defer { Task { try? await connection.close() } }
                try await connection.listen(on: Self.changeChannel) { notifications in
                    delay = .milliseconds(100)
                    // Where the feed stands now: what is there is covered by `unknown`. The newest
                    // 100 ids are looked at one by one, so that a row of a transaction still
                    // running (an id drawn earlier, committed later) is not skipped.
                    let newest =
                        try await connection.query("SELECT coalesce(max(id), 0) FROM change_feed", logger: logger).collect().first?
                        .decode(Int64.self) ?? 0
                    var cursor = ChangeFeedCursor<ContinuousClock.Instant>(after: max(0, newest - 100))
                    _ = cursor.take(
                        try await feed(after: max(0, newest - 100), on: connection).map(\.id).filter { $0 <= newest }, now: clock.now)
                    await handle(.unknown)
                    onListening()
                    var lastPruned = clock.now
                    for try await _ in notifications {
                        // The rows after the highest seen, and the missing ones below it: a
                        // notification (forged or not) costs one indexed read of what is new.
                        var rows = try await feed(after: cursor.highest, missing: cursor.missing, on: connection)
                        let read = !rows.isEmpty
                        while !rows.isEmpty {
                            let byID = Dictionary(rows.map { ($0.id, $0) }) { first, _ in first }
                            let taken = cursor.take(rows.map(\.id), now: clock.now)
                            if taken.gaveUp { await handle(.unknown) }
                            for id in taken.new {
                                guard let row = byID[id], !row.own else { continue }
                                guard let change = row.change else {
                                    logger.warning("change feed row not understood", metadata: ["event": "change-feed", "id": "\(id)"])
                                    continue
                                }
                                await handle(change)
                            }
                            guard rows.count == 1000, let last = rows.last?.id else { break }
                            rows = try await feed(after: last, on: connection)
                        }
                        // A gap given up on while nothing new came is noticed here.
                        if !read, cursor.take([], now: clock.now).gaveUp { await handle(.unknown) }
                        if lastPruned.duration(to: clock.now) > .seconds(600) {
                            lastPruned = clock.now
                            try await pruneFeed(on: connection)
                        }
                    }
                }
            } catch {
                guard !Task.isCancelled else { return }
                logger.warning(
                    "change feed lost; connecting again", metadata: ["event": "change-feed", "error": "\(error)", "retry_in": "\(delay)"])
            }
            try? await Task.sleep(for: delay)
            delay = min(delay * 2, .seconds(5))
        }
    }
}
