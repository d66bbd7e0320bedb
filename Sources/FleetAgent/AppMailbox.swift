import FleetDeviceFiles
import FleetDeviceState
import PosixThreads

/// Requests the inbox has checked, waiting for their app's loop, in the order they arrived.
/// Delivering one wakes the loop (and ends a long-poll in progress).
final class AppMailbox: Sendable {
    /// One request file's content as the inbox found it.
    struct Delivery: Sendable {
        enum Content: Sendable {
            case request(InboxRequest)
            /// Moved aside already; the loop records the reason for `set --wait` and the library.
            case refused(String)
        }

        /// The request's id (its file name without `.json`).
        let id: String
        /// The file, which the loop removes once the request is handled; `nil` when refused.
        let path: String?
        let content: Content
    }

    private struct State {
        var items: [Delivery] = []
        /// Whether a delivery came since the last ``takeAll()`` (put-back ones do not count).
        var fresh = false
    }

    private let state = Locked(State())
    /// Signalled on every delivery.
    let wakeup = Wakeup()

    /// Adds a delivery unless one with the same id is waiting (a rescan finds files again).
    func deliver(_ delivery: Delivery) {
        state.withLock { state in
            if !state.items.contains(where: { $0.id == delivery.id }) { state.items.append(delivery) }
            state.fresh = true
        }
        wakeup.signal()
    }

    /// Whether a delivery came since the last ``takeAll()``: the loop must not sleep on it.
    var hasFreshDeliveries: Bool { state.withLock { $0.fresh } }

    /// Takes every waiting delivery.
    func takeAll() -> [Delivery] {
        state.withLock { state in
            defer { state = State() }
            return state.items
        }
    }

    /// Puts deliveries the loop could not handle yet back in front, in their order.
    func putBack(_ deliveries: [Delivery]) {
        guard !deliveries.isEmpty else { return }
        state.withLock { state in
            let waiting = state.items.filter { item in !deliveries.contains { $0.id == item.id } }
            state.items = deliveries + waiting
        }
    }
}
