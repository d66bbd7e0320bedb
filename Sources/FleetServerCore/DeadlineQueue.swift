/// When each long-poll's time is up: a min-heap of (deadline, waiter), so that one timer serves
/// every held long-poll — the earliest deadline is always at hand, and the ones due are taken
/// in order.
///
/// Entries are not removed when their waiter ends early (woken by a change, replaced,
/// cancelled): ``due(at:)`` hands them out like the others and the caller skips the waiters it
/// no longer has. So that a fleet woken again and again does not pile them up,
/// ``compact(keeping:)`` drops them once they outnumber the live ones.
///
/// A pure value: time is whatever the caller says it is.
public struct DeadlineQueue<Instant: Comparable>: Sendable where Instant: Sendable {
    private var heap: [(deadline: Instant, waiter: Int)] = []

    public init() {}

    /// The number of entries, live and stale.
    public var count: Int { heap.count }

    /// The earliest deadline, if any.
    public var earliest: Instant? { heap.first?.deadline }

    /// Adds `waiter`, due at `deadline`.
    public mutating func add(_ waiter: Int, at deadline: Instant) {
        heap.append((deadline, waiter))
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].deadline < heap[parent].deadline else { break }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    /// Takes out the waiters whose deadline is `now` or earlier, earliest first.
    public mutating func due(at now: Instant) -> [Int] {
        var waiters: [Int] = []
        while let first = heap.first, first.deadline <= now {
            waiters.append(first.waiter)
            removeFirst()
        }
        return waiters
    }

    /// Keeps only the entries of waiters for which `isLive` holds, when the others are more
    /// than half of them (and more than a few): the cost is linear, and paid seldom.
    public mutating func compact(keeping isLive: (Int) -> Bool) {
        guard heap.count > 1024 else { return }
        let live = heap.filter { isLive($0.waiter) }
        guard live.count * 2 < heap.count else { return }
        heap = []
        heap.reserveCapacity(live.count)
        for entry in live { add(entry.waiter, at: entry.deadline) }
    }

    private mutating func removeFirst() {
        let last = heap.removeLast()
        guard !heap.isEmpty else { return }
        heap[0] = last
        var parent = 0
        while true {
            let left = 2 * parent + 1
            guard left < heap.count else { break }
            let right = left + 1
            let smaller = right < heap.count && heap[right].deadline < heap[left].deadline ? right : left
            guard heap[smaller].deadline < heap[parent].deadline else { break }
            heap.swapAt(parent, smaller)
            parent = smaller
        }
    }
}
