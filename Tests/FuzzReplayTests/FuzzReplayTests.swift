import FleetFuzzTargets
import Foundation
import Testing

/// The fuzz corpora (`Fuzz/corpus/<target>/`: the seeds, and every input a fuzzing run found
/// worth keeping, crashes included once fixed) replayed through their targets as ordinary tests:
/// a regression of anything a fuzzer ever found fails here.
@Suite("Fuzz corpora replayed")
struct FuzzReplayTests {
    static let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Fuzz/corpus").standardized

    @Test("every target has a corpus, and every input of it runs through its target", arguments: FuzzTargets.all.map(\.name))
    func replay(_ name: String) throws {
        let target = try #require(FuzzTargets.all.first { $0.name == name }?.run)
        let folder = Self.corpus.appendingPathComponent(name)
        let files = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { !$0.hasPrefix(".") }
        #expect(files.count >= 3, "the corpus of \(name) has \(files.count) inputs")
        for file in files {
            target(Array(try Data(contentsOf: folder.appendingPathComponent(file))))
        }
    }
}
