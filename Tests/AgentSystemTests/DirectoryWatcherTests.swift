import FileWatch
import FleetIO
import Foundation
import Testing

@Suite("Watching the inbox with inotify")
struct DirectoryWatcherTests {
    @Test("a file renamed in or closed after writing appears; a link shows as created; a removed one as removed; stop ends the stream")
    func events() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("fleetset-watch-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let watcher = try DirectoryWatcher(directories: [directory])
        try Data("{}".utf8).write(to: URL(fileURLWithPath: directory + "/.incoming"))
        rename(directory + "/.incoming", directory + "/a.json")
        symlink("/etc/passwd", directory + "/b.json")
        unlink(directory + "/a.json")
        var seen: [DirectoryWatcher.Event] = []
        for await event in watcher.events {
            seen.append(event)
            if seen.contains(.appeared(directory: directory, name: "a.json"))
                && seen.contains(.created(directory: directory, name: "b.json"))
                && seen.contains(.removed(directory: directory, name: "a.json"))
            {
                watcher.stop()
            }
        }
        #expect(seen.contains(.appeared(directory: directory, name: "a.json")))
        #expect(seen.contains(.created(directory: directory, name: "b.json")))
        #expect(seen.contains(.removed(directory: directory, name: ".incoming")), "renamed away")
        #expect(seen.contains(.removed(directory: directory, name: "a.json")))
    }

    @Test("a directory that does not exist is an error naming it")
    func missing() {
        #expect(throws: FileError.self) { try DirectoryWatcher(directories: ["/nonexistent/spool"]) }
    }
}
