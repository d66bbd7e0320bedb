import Curl
import FleetServerCore
import FleetWebhooks
import Logging
import PosixThreads
import ServiceLifecycle

#if canImport(Glibc)
import Glibc
#endif

/// Makes one attempt to send a message: checks its URL and every address its host resolves to
/// against the ``DestinationPolicy``, connects to the checked address (libcurl does not look the
/// name up again), signs, POSTs, and says how it went. Never follows a redirect.
public struct WebhookSender: Sendable {
    /// How long an attempt may take, connecting included: 15 s.
    public static let timeout: Duration = .seconds(15)
    /// How long the host's lookup may take: 5 s.
    public static let lookupTimeout: Duration = .seconds(5)
    /// How much of an answer's body is read (the rest is a failed attempt): 1 MiB.
    public static let answerLimit = 1 << 20

    let client: HTTPClient
    let policy: DestinationPolicy

    /// A sender with a libcurl client of its own: TLS verified against the system's CAs, plain
    /// HTTP only where the policy allows it (a loopback host).
    public init(policy: DestinationPolicy, timeout: Duration = WebhookSender.timeout) throws {
        client = try HTTPClient(
            configuration: HTTPClient.Configuration(
                allowInsecureHTTP: true,
                limits: TransferLimits(
                    connectTimeout: .seconds(5), timeout: timeout, lowSpeedLimit: nil, maxResponseBytes: Self.answerLimit),
                maxRedirects: 0, userAgent: "fleetset-server webhooks"))
        self.policy = policy
    }

    /// Ends the sender's client.
    public func shutdown() async { await client.shutdown() }

    /// One attempt at `now` (the signature's timestamp).
    public func attempt(_ claimed: ClaimedMessage, now: Int64) async -> DeliveryOutcome {
        let destination: DestinationPolicy.Destination
        let address: String
        do {
            destination = try policy.check(url: claimed.subscription.url)
            let addresses = try await HostAddresses.resolve(destination.host, timeout: Self.lookupTimeout)
            for candidate in addresses { try policy.check(address: candidate, for: destination) }
            address = addresses[0]
        } catch let refused as DestinationPolicy.Refused {
            return .failed("refused: \(refused.reason)")
        } catch {
            return .failed("\(error)")
        }
        let message = claimed.entry.message
        var headers = HTTPClient.Headers()
        for header in message.headers(now: now, secrets: claimed.subscription.signingSecrets(now: now)) {
            headers[header.name] = header.value
        }
        do {
            let response = try await client.execute(
                HTTPClient.Request(method: .post, url: destination.url, headers: headers, body: message.body, connectAddress: address))
            return (200..<300).contains(response.status) ? .delivered(status: response.status) : .refused(status: response.status)
        } catch let error as HTTPClientError {
            // libcurl's text names the host and port, never the URL's path or query (which may hold a credential).
            return .failed(error.kind.description + (error.curlMessage.map { ": " + $0 } ?? ""))
        } catch {
            return .failed("\(error)")
        }
    }
}

/// A host's addresses, from the system's resolver on a thread of its own (`getaddrinfo` blocks).
enum HostAddresses {
    struct LookupFailed: Error, CustomStringConvertible {
        let host: String
        let reason: String
        var description: String { "could not resolve \(host): \(reason)" }
    }

    /// The addresses of `host` (an IP address is its own), in the resolver's order; a lookup
    /// that takes longer than `timeout` fails (its thread ends when the resolver gives up).
    static func resolve(_ host: String, timeout: Duration = .seconds(5)) async throws -> [String] {
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        if DestinationPolicy.isAddress(bare) { return [bare] }
        return try await withCheckedThrowingContinuation { continuation in
            let answered = Locked(false)
            let answer: @Sendable (Result<[String], any Error>) -> Void = { result in
                let first = answered.withLock { answered in
                    defer { answered = true }
                    return !answered
                }
                if first { continuation.resume(with: result) }
            }
            _ = DetachedThread.start(named: "fleetset-resolve") { answer(Result { try lookUp(bare) }) }
            Task {
                try? await Task.sleep(for: timeout)
                answer(.failure(LookupFailed(host: bare, reason: "no answer within \(timeout)")))
            }
        }
    }

    private static func lookUp(_ host: String) throws -> [String] {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, nil, &hints, &list)
        guard status == 0, let first = list else { throw LookupFailed(host: host, reason: String(cString: gai_strerror(status))) }
        defer { freeaddrinfo(first) }
        var addresses: [String] = []
        var next: UnsafeMutablePointer<addrinfo>? = first
        while let entry = next {
            var text = [CChar](repeating: 0, count: Int(NI_MAXHOST))
            if getnameinfo(entry.pointee.ai_addr, entry.pointee.ai_addrlen, &text, socklen_t(text.count), nil, 0, NI_NUMERICHOST) == 0 {
                let address = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
                if !addresses.contains(address) { addresses.append(address) }
            }
            next = entry.pointee.ai_next
        }
        guard !addresses.isEmpty else { throw LookupFailed(host: host, reason: "no address") }
        return addresses
    }
}

/// Sends the outbox's messages while the server runs: claims the due ones (each instance its
/// own, under a lease), sends them a few at a time, records each attempt. It looks again at
/// once after a full batch, when this instance queued a message, when an attempt it recorded
/// falls due, and otherwise every ``lookInterval`` (what another instance queued is found then).
public struct WebhookDispatcher: Service, CustomStringConvertible {
    /// How many messages one look claims, all sent at once: every one of them starts at once,
    /// so each has the whole lease.
    public static let batch = 8
    /// How long a claim lasts: well beyond the longest attempt (a 5 s lookup and a 15 s
    /// request), so a live instance's claim does not run out under it even with some clock skew
    /// between instances; an instance killed mid-attempt leaves its messages to others after it.
    public static let lease: Int64 = 60

    let service: FleetServices
    let sender: WebhookSender
    let schedule: DeliverySchedule
    let lookInterval: Duration
    let logger: Logger

    public init(
        service: FleetServices, sender: WebhookSender, schedule: DeliverySchedule = .standard, lookInterval: Duration, logger: Logger
    ) {
        self.service = service
        self.sender = sender
        self.schedule = schedule
        self.lookInterval = lookInterval
        self.logger = logger
    }

    public var description: String { "WebhookDispatcher" }

    public func run() async throws {
        let events = service.events.subscribe()
        await cancelWhenGracefulShutdown {
            await withTaskGroup(of: Void.self) { group in
                let wake = Wakeup()
                group.addTask {
                    // Anything this instance changed may have queued messages.
                    for await event in events {
                        if case .statusReported = event { continue }
                        wake.signal()
                    }
                }
                group.addTask {
                    var countedAt: Int64?
                    while !Task.isCancelled {
                        let next = await self.look()
                        if next.sent || countedAt.map({ service.now - $0 >= Self.countInterval }) ?? true {
                            await self.countOutbox()
                            countedAt = service.now
                        }
                        guard !next.again else { continue }
                        var wait = self.lookInterval
                        if let due = next.due { wait = min(wait, .seconds(max(0, due - service.now))) }
                        await wake.wait(upTo: wait)
                    }
                }
                await group.next()
                group.cancelAll()
            }
        }
        await sender.shutdown()
    }

    /// How often the outbox's gauge is counted when nothing is sent: 30 s.
    static let countInterval: Int64 = 30

    /// Sets `fleetset_webhook_outbox` from the store.
    func countOutbox() async {
        guard let counts = try? await service.context.store.outboxCounts() else { return }
        for (state, count) in counts { service.metrics.webhookOutbox(state.rawValue, count: count) }
    }

    /// One look: claims, sends, records. Returns whether it sent anything, whether to look again
    /// at once (a full batch), and when the earliest message it put back falls due.
    func look() async -> (sent: Bool, again: Bool, due: Int64?) {
        let now = service.now
        let claimedUntil = now + Self.lease
        let claimed: [ClaimedMessage]
        do {
            claimed = try await service.context.store.claimOutboxEntries(now: now, claimedUntil: claimedUntil, limit: Self.batch)
        } catch {
            logger.error("webhook outbox unreadable", metadata: ["event": "webhook-outbox", "error": "\(error)"])
            return (false, false, nil)
        }
        guard !claimed.isEmpty else { return (false, false, nil) }
        var due: Int64?
        await withTaskGroup(of: OutboxEntry?.self) { group in
            for message in claimed { group.addTask { await self.deliver(message, claimedUntil: claimedUntil) } }
            for await result in group {
                if let entry = result { due = min(due ?? entry.nextAt, entry.nextAt) }
            }
        }
        return (true, claimed.count == Self.batch, due)
    }

    /// Sends one message and records the attempt; returns the entry when it stays pending.
    private func deliver(_ claimed: ClaimedMessage, claimedUntil: Int64) async -> OutboxEntry? {
        let outcome = await sender.attempt(claimed, now: service.now)
        let attempted = claimed.entry.after(outcome, now: service.now, fraction: .random(in: 0...1), schedule: schedule)
        service.metrics.webhookAttempt(attempted.state == .dead ? "dead" : attempted.state == .delivered ? "delivered" : "failed")
        var metadata: Logger.Metadata = [
            "event": "webhook-attempt", "webhook": "\(claimed.subscription.id)", "message": "\(claimed.entry.message.id)",
            "type": "\(claimed.entry.message.type)", "attempt": "\(attempted.attempts)", "result": "\(outcome.text)",
            "state": "\(attempted.state.rawValue)",
        ]
        if attempted.state == .pending { metadata["next"] = "\(attempted.nextAt - service.now)s" }
        do {
            guard try await service.context.store.recordOutboxAttempt(attempted, claimedUntil: claimedUntil) else {
                logger.warning("webhook attempt not recorded: its claim ran out", metadata: metadata)
                return nil
            }
        } catch {
            logger.error("webhook attempt not recorded", metadata: ["event": "webhook-outbox", "error": "\(error)"])
            return nil
        }
        // Logged once recorded: what the log says happened is what the store holds.
        switch attempted.state {
        case .delivered: logger.info("webhook delivered", metadata: metadata)
        case .pending: logger.notice("webhook attempt failed", metadata: metadata)
        case .dead: logger.warning("webhook message dead: tried for a day", metadata: metadata)
        }
        return attempted.state == .pending ? attempted : nil
    }
}
