/// The CLI's side of the OAuth 2.0 Device Authorization Grant (RFC 8628 §3.4–3.5) as a value:
/// it is told what each poll of the token endpoint answered and says what to do next. No
/// clock of its own: the time is passed in.
public struct DevicePoll: Sendable, Hashable {
    /// What the token endpoint answered to one poll.
    public enum Answer: Sendable, Hashable {
        /// `authorization_pending`: the person has not approved yet.
        case pending
        /// `slow_down`: poll 5 s less often from now on.
        case slowDown
        /// Tokens: approved.
        case granted
        /// `access_denied`: the person said no.
        case denied
        /// `expired_token`: the code's time is over.
        case expired
        /// Anything else: an error code and its description (say it and stop).
        case failed(String)
    }

    /// What to do next.
    public enum Next: Sendable, Hashable {
        /// Poll again after this many seconds.
        case poll(after: Int)
        /// Approved: take the tokens.
        case done
        /// Stop, saying why.
        case stop(String)
    }

    /// Seconds between polls (RFC 8628: 5 unless the provider says otherwise; `slow_down` adds 5).
    public private(set) var interval: Int
    /// When the device code expires, in seconds since the epoch.
    public let expiresAt: Int64

    /// - Parameters:
    ///   - interval: the authorization response's `interval` (`nil`: 5).
    ///   - expiresIn: its `expires_in`.
    ///   - now: the time it was received.
    public init(interval: Int?, expiresIn: Int, now: Int64) {
        // What a provider says is kept within reason: 1 s to 5 min between polls, an hour at most.
        self.interval = min(max(1, interval ?? 5), 300)
        expiresAt = now + Int64(min(max(0, expiresIn), 3600))
    }

    /// The first poll: one interval after the code was shown.
    public var first: Next { .poll(after: interval) }

    /// What to do after `answer`, at `now`.
    public mutating func next(after answer: Answer, now: Int64) -> Next {
        switch answer {
        case .granted: return .done
        case .denied: return .stop("the sign-in was refused at the identity provider")
        case .expired: return .stop("the code expired before it was approved; run the command again")
        case .failed(let reason): return .stop("the identity provider answered: \(reason)")
        case .slowDown:
            interval = min(interval + 5, 300)
            fallthrough
        case .pending:
            guard now + Int64(interval) < expiresAt else {
                return .stop("the code expired before it was approved; run the command again")
            }
            return .poll(after: interval)
        }
    }
}
