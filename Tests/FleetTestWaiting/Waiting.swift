/// Waiting for a condition another process, or another task of the test, brings about.
///
/// A module of its own, with no dependencies, so that any test target can bound its waits with
/// it: `FleetTestSupport` (which reaches libcurl and child processes) offers it as its own
/// `Waiting`, and the tests of the server's core and of the HTTP client use it directly.
public enum Waiting {
    /// Checks `condition` every 2 ms until it holds; throws `message` after `timeout`. The
    /// timeout only bounds a failing test: a passing one returns as soon as the condition holds,
    /// and one whose condition never holds fails with `message` instead of hanging. Say in
    /// `message` what was awaited. The condition may await, as a question to an in-process server
    /// does. It sleeps as a task, never blocking a thread of the concurrency pool (in-process
    /// servers of the test need those).
    public static func until(
        timeout: Duration = .seconds(60), _ message: @autoclosure () -> String, _ condition: () async throws -> Bool
    ) async throws {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if try await condition() { return }
            try await Task.sleep(for: .milliseconds(2))
        }
        if try await condition() { return }
        throw WaitTimedOut(message: message())
    }
}

/// What a test waited for did not come in time; the message says what it was.
public struct WaitTimedOut: Error, CustomStringConvertible {
    public let message: String
    public init(message: String) { self.message = message }
    public var description: String { message }
}
