import ServiceLifecycle

/// Keeps a stopping server running until its open connections have closed (at most
/// ``limit``), so that what the shutdown answers is written before the process ends.
///
/// Hummingbird's server service ends as soon as it stops listening when no connection keeps a
/// task of its own (``ParkingHTTP1Channel``): the quiesce event has reached every connection
/// — parked long-polls answering 304, event streams ending, requests in progress finishing —
/// but their answers may still be on their way. The service group stops its services in
/// reverse order, waiting for each: this one, added last of the application's own, is stopped
/// right after the server, and waits for ``OpenConnections`` to empty.
struct ConnectionDrain: Service, CustomStringConvertible {
    let connections: OpenConnections
    /// The longest it waits: a client that never finishes its request is closed by the read
    /// timeout (30 s) anyway.
    var limit: Duration = .seconds(30)

    var description: String { "ConnectionDrain" }

    func run() async throws {
        try? await gracefulShutdown()
        let deadline = ContinuousClock.now + limit
        while connections.count > 0, !Task.isCancelled, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(20))
        }
    }
}
