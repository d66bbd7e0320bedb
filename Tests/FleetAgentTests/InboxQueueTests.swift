import FleetAgentCore
import FleetDeviceState
import Testing

@testable import FleetAgent

@Suite("The inbox's queue: level-triggered, so no delivery is ever missed")
struct InboxQueueTests {
    @Test("10,000 deliveries from another task while the reader takes them in batches: every one arrives, in order")
    func nothingLost() async {
        let queue = InboxQueue()
        let count = 10_000
        let writer = Task.detached {
            for index in 0..<count {
                queue.deliver(InboxDelivery(id: "\(index)", path: nil, content: .request(.sync)))
                if index % 97 == 0 { await Task.yield() }
            }
        }
        let reader = Task {
            var received: [String] = []
            while received.count < count, let batch = await queue.next() {
                received += batch.map(\.id)
            }
            return received
        }
        // A bound against hanging, not a measure: a missed wake-up would leave the reader waiting.
        let bound = Task {
            try await Task.sleep(for: .seconds(60))
            reader.cancel()
        }
        let received = await reader.value
        bound.cancel()
        await writer.value
        #expect(received == (0..<count).map { "\($0)" })
    }

    @Test("a delivery made before the reader waits is returned at once; a cancelled reader gets nil and nothing is lost")
    func beforeWaitAndCancel() async {
        let queue = InboxQueue()
        queue.deliver(InboxDelivery(id: "early", path: nil, content: .request(.sync)))
        #expect(await queue.next()?.map(\.id) == ["early"])
        let reader = Task { await queue.next() }
        reader.cancel()
        #expect(await reader.value == nil)
        queue.deliver(InboxDelivery(id: "later", path: nil, content: .request(.sync)))
        #expect(queue.takeQueued().map(\.id) == ["later"])
    }
}
