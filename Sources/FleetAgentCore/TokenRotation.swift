/// The device token's rotation, asked for by the server (a settings answer's
/// `Fleetset-Rotate-Token`) and done with `POST /v1/device/token` before the next request.
///
/// A failed rotation never stops the loop: the current token keeps working, so reports,
/// changes and settings requests go on while the rotation waits for its own backoff (the server
/// asks again with its next answer). Throttling holds everything, as always.
struct TokenRotation<Instant: InstantProtocol> where Instant.Duration == Duration {
    /// The server asked for a rotation that has not been done.
    private(set) var pending = false
    private var backoff = RetryBackoff()
    /// Not before this (after a failure).
    private(set) var notBefore: Instant?

    /// Whether the rotation should go now.
    func isDue(at now: Instant) -> Bool { pending && (notBefore.map { now >= $0 } ?? true) }

    /// The server asked for a rotation.
    mutating func requested() { pending = true }

    /// The token was rotated.
    mutating func rotated() {
        pending = false
        backoff.reset()
        notBefore = nil
    }

    /// What a failed rotation does.
    enum AfterFailure {
        /// Throttled: every request waits for the loop's backoff.
        case holdEverything
        /// Tried again no sooner than after this; the rest of the loop goes on.
        case retryAfter(Duration)
    }

    mutating func failed(_ failure: SyncFailure, at now: Instant, using random: inout some RandomNumberGenerator) -> AfterFailure {
        pending = false
        guard failure.kind != .throttled else { return .holdEverything }
        let delay = backoff.delayAfterFailure(retryAfter: failure.retryAfter, using: &random)
        notBefore = now.advanced(by: delay)
        return .retryAfter(delay)
    }
}
