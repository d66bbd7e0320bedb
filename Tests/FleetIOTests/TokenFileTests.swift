import FleetIO
import Foundation
import Testing

@Suite("Token files and optional files")
struct TokenFileTests {
    func path(_ contents: String?) throws -> String {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("fleetset-token-\(UUID().uuidString)")
        if let contents { try Data(contents.utf8).write(to: url) }
        return url.path
    }

    @Test(
        "a token is the first line, without surrounding blanks",
        arguments: [
            ("fse_abc\n", "fse_abc"), ("  fse_abc \r\nsecond line\n", "fse_abc"), ("fse_abc", "fse_abc"), ("", ""), ("\nfse_abc\n", ""),
        ])
    func token(contents: String, expected: String) throws {
        #expect(try FileSystem.readToken(try path(contents)) == expected)
    }

    @Test("a missing token file is an error naming it; a huge one is refused")
    func refusals() throws {
        let missing = try path(nil)
        #expect(throws: FileError(path: missing, operation: "open", code: ENOENT)) { try FileSystem.readToken(missing) }
        let huge = try path(String(repeating: "x", count: 5000))
        #expect(throws: FileError.self) { try FileSystem.readToken(huge) }
    }

    @Test("an optional file that is missing is nil; one that is there is read")
    func optional() throws {
        #expect(try FileSystem.readFileIfPresent(try path(nil)) == nil)
        #expect(try FileSystem.readFileIfPresent(try path("abc")) == Array("abc".utf8))
    }
}
