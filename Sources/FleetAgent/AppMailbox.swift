import FleetDeviceFiles
import Synchronization

/// Requests the inbox has checked, waiting for their app's loop, in the order they arrived.
/// Delivering one wakes the loop (and ends a long-poll in progress).
final class AppMailbox: Sendable {
    /// One request file's content as the inbox found it.
    struct Delivery: Sendable {
        enum Content: Sendable {
            case request(SpoolRequest)
            /// Moved aside already; the loop records the reason for `set --wait` and the library.
            case refused(String)
        }

        /// The request's id (its file name without `.json`).
        let id: String
        /// The file, which the loop removes once the request is handled; `nil` when refused.
        let path: String?
        let content: Content
    }

    private let items = Mutex<[Delivery]>([])
    /// Signalled on every delivery.
    let wakeup = Wakeup()

    /// Adds a delivery unless one with the same id is waiting (a rescan finds files again).
    func deliver(_ delivery: Delivery) {
        items.withLock { items in
            if !items.contains(where: { $0.id == delivery.id }) { items.append(delivery) }
        }
        wakeup.signal()
    }

    /// Takes every waiting delivery.
    func takeAll() -> [Delivery] {
        items.withLock { items in
            defer { items = [] }
            return items
        }
    }

    /// Puts deliveries the loop could not handle yet back in front, in their order.
    func putBack(_ deliveries: [Delivery]) {
        guard !deliveries.isEmpty else { return }
        items.withLock { items in
            let waiting = items.filter { item in !deliveries.contains { $0.id == item.id } }
            items = deliveries + waiting
        }
    }
}
