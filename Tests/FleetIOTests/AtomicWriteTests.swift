import FleetIO
import Foundation
import Testing

@Suite("Atomic file replacement")
struct AtomicWriteTests {
    func temporaryFolder() throws -> String {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("fleetset-io-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url.path
    }

    @Test("writes, then replaces, leaving no temporary file behind")
    func replaces() throws {
        let folder = try temporaryFolder()
        let path = folder + "/settings.json"
        try FileSystem.writeAtomically(Array("one".utf8), to: path)
        try FileSystem.writeAtomically(Array("two".utf8), to: path)
        #expect(try FileSystem.readFile(path) == Array("two".utf8))
        #expect(try FileSystem.regularFiles(under: folder) == ["settings.json"])
    }

    @Test("a secret file is 0600 from the start, whatever the umask")
    func mode() throws {
        let folder = try temporaryFolder()
        let path = folder + "/admin-token"
        let previous = umask(0)
        defer { umask(previous) }
        try FileSystem.writeAtomically(Array("secret".utf8), to: path, mode: 0o600)
        var status = stat()
        #expect(stat(path, &status) == 0)
        #expect(status.st_mode & 0o777 == 0o600)
    }

    @Test("a failed replacement leaves the old file and no temporary file")
    func failureKeepsOld() throws {
        let folder = try temporaryFolder()
        let target = folder + "/occupied"
        try FileManager.default.createDirectory(atPath: target + "/child", withIntermediateDirectories: true)
        #expect(throws: FileError.self) { try FileSystem.writeAtomically(Array("x".utf8), to: target) }
        #expect(try FileSystem.regularFiles(under: folder) == [])
        #expect(FileManager.default.fileExists(atPath: target + "/child"))
    }

    @Test("linking a name to the file it already names leaves no temporary name behind")
    func relinkSameFile() throws {
        let folder = try temporaryFolder()
        let current = folder + "/settings.json"
        let previous = folder + "/settings.previous.json"
        try FileSystem.writeAtomically(Array("one".utf8), to: current)
        for _ in 0..<3 { #expect(try FileSystem.replaceWithLink(previous, to: current)) }
        #expect(try FileSystem.regularFiles(under: folder).sorted() == ["settings.json", "settings.previous.json"])
        #expect(try FileSystem.readFile(previous) == Array("one".utf8))
    }

    @Test("a missing folder is an error naming the path")
    func missingFolder() {
        #expect {
            try FileSystem.writeAtomically([1], to: "/nonexistent-fleetset/x.json")
        } throws: { error in
            "\(error)".hasPrefix("cannot create /nonexistent-fleetset/x.json.tmp-")
        }
    }
}
