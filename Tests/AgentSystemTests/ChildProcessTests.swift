import ChildProcess
import FleetIO
import Foundation
import Testing

@Suite("Child processes for hooks")
struct ChildProcessTests {
    @Test("runs with exactly the given environment and collects its output")
    func environmentAndOutput() async throws {
        let result = try await ChildProcess.run(
            ["/bin/sh", "-c", "echo \"$FLEETSET_APP:${HOME:-unset}\"; echo oops >&2"], environment: ["FLEETSET_APP=kiosk"],
            timeout: .seconds(10))
        #expect(result.succeeded && result.termination == .exited(0))
        #expect(result.output == "kiosk:unset\noops\n")
    }

    @Test("the child inherits no descriptor of this process but its standard input, output and error")
    func noInheritedDescriptors() async throws {
        // A socket without close-on-exec, as a library might leave one: a hook, or a daemon a hook
        // starts, must not keep it open.
        let socketDescriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #expect(socketDescriptor > 2)
        defer { close(socketDescriptor) }
        let result = try await ChildProcess.run(["/bin/sh", "-c", "ls /proc/$$/fd"], environment: [], timeout: .seconds(10))
        #expect(result.succeeded)
        #expect(result.output.split(separator: "\n") == ["0", "1", "2"], "the child has: \(result.output)")
    }

    @Test("a failing program's status and the tail of its output")
    func failure() async throws {
        let result = try await ChildProcess.run(
            ["/bin/sh", "-c", "head -c 5000 /dev/zero | tr '\\0' a; echo; echo last line; exit 7"], environment: [], timeout: .seconds(10),
            outputLimit: 100)
        #expect(result.termination == .exited(7) && !result.succeeded && !result.timedOut)
        #expect(result.output.count == 100 && result.output.hasSuffix("a\nlast line\n"))
    }

    @Test("past its time limit the whole process group is stopped, grandchildren included")
    func timeout() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("fleetset-child-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let pidFile = directory + "/grandchild.pid"
        let result = try await ChildProcess.run(
            ["/bin/sh", "-c", "sleep 60 & echo $! > \(pidFile); wait"], environment: ["PATH=/usr/bin:/bin"], timeout: .milliseconds(300))
        #expect(result.timedOut && result.termination == .signaled(SIGTERM))
        let grandchild = try #require(
            Int32(try String(contentsOfFile: pidFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)))
        usleep(100_000)
        #expect(Self.isAlive(grandchild) == false, "the grandchild \(grandchild) is gone")
    }

    /// Whether `pid` runs (a zombie, dead but not yet reaped by whoever adopted it, does not).
    static func isAlive(_ pid: Int32) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let afterName = stat.lastIndex(of: ")")
        else { return false }
        let state = stat[stat.index(afterName, offsetBy: 2)]
        return state != "Z" && state != "X"
    }

    @Test("a program that ignores SIGTERM is killed after the grace period")
    func stubborn() async throws {
        let result = try await ChildProcess.run(
            ["/bin/sh", "-c", "trap '' TERM; while :; do sleep 0.05; done"], environment: ["PATH=/usr/bin:/bin"],
            timeout: .milliseconds(200))
        #expect(result.timedOut && result.termination == .signaled(SIGKILL))
        #expect(result.duration >= ChildProcess.killGrace)
    }

    @Test("signals the parent ignores are not ignored by the child")
    func signalDefaults() async throws {
        let previous = signal(SIGTERM, SIG_IGN)
        defer { signal(SIGTERM, previous) }
        let result = try await ChildProcess.run(["/bin/sleep", "30"], environment: [], timeout: .milliseconds(200))
        #expect(result.termination == .signaled(SIGTERM) && result.duration < ChildProcess.killGrace)
    }

    @Test("a missing program is an error naming it")
    func missing() async throws {
        await #expect(throws: FileError.self) { try await ChildProcess.run(["/nonexistent/hook"], environment: [], timeout: .seconds(1)) }
        do {
            _ = try await ChildProcess.run(["/nonexistent/hook"], environment: [], timeout: .seconds(1))
        } catch {
            #expect(error.description == "cannot run /nonexistent/hook: No such file or directory")
        }
    }

    @Test("cancelling the task stops the child at once")
    func cancellation() async throws {
        let task = Task { try await ChildProcess.run(["/bin/sleep", "30"], environment: [], timeout: .seconds(60)) }
        try await Task.sleep(for: .milliseconds(100))
        task.cancel()
        let result = try await task.value
        // Stopped by SIGTERM, not waited for: a `sleep 30` left to finish exits 0.
        #expect(result.cancelled && !result.timedOut && result.termination == .signaled(SIGTERM))
    }
}
