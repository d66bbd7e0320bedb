import FleetIO
import Testing

@Suite("Handing back the pages of start-up")
struct StartupPagesTests {
    @Test("every read-only file mapping of the process is advised, and the process goes on as before")
    func release() throws {
        let advised = StartupPages.release()
        #expect(advised > 1 << 20, "the test binary and its libraries are mapped read-only: \(advised) bytes")
        // The code comes back on its next use: read a file and write one, as before.
        let bytes = try FileSystem.readFile("/proc/self/status")
        #expect(String(decoding: bytes, as: UTF8.self).contains("VmRSS"))
        #expect(StartupPages.release() > 0, "and it can be done again")
    }
}
