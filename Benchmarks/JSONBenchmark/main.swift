// Benchmark of FleetJSON's reader against Foundation's JSONSerialization and JSONDecoder on a
// ~1 MB settings-like document (release build: `swift run -c release JSONBenchmark [ROUNDS]`).
// Prints the median time of each reader per parse and its throughput.

import FleetJSON
import Foundation

struct Setting: Decodable {
    let key: String
    let title: String
    let writable: Bool
    let value: Double
    let options: [String]
    let nested: [String: Int]
}

/// A document of `count` settings objects, about 1 MB for 6,500.
func makeDocument(count: Int) -> [UInt8] {
    var text = "["
    for index in 0..<count {
        if index > 0 { text += "," }
        text += #"{"key":"setting\#(index)","title":"Idle reset time \#(index) ünïcødé","writable":\#(index % 2 == 0),"#
        text += #""value":\#(Double(index) * 1.25),"options":["one","two","three"],"nested":{"a":\#(index),"b":-\#(index)}}"#
    }
    return Array((text + "]").utf8)
}

func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }

func measure(rounds: Int, _ body: () throws -> Void) rethrows -> Double {
    var samples: [Double] = []
    for _ in 0..<rounds {
        let start = ContinuousClock.now
        try body()
        let elapsed = ContinuousClock.now - start
        samples.append(Double(elapsed.components.seconds) * 1e3 + Double(elapsed.components.attoseconds) / 1e15)
    }
    return median(samples)
}

let rounds = CommandLine.arguments.count > 1 ? Int(CommandLine.arguments[1]) ?? 30 : 30
let bytes = makeDocument(count: 6_500)
let data = Data(bytes)
let megabytes = Double(bytes.count) / 1_048_576

let results: [(String, Double)] = [
    ("FleetJSON JSONParser.parse", try measure(rounds: rounds) { _ = try JSONParser.parse(bytes) }),
    ("Foundation JSONSerialization", try measure(rounds: rounds) { _ = try JSONSerialization.jsonObject(with: data) }),
    ("Foundation JSONDecoder (typed)", try measure(rounds: rounds) { _ = try JSONDecoder().decode([Setting].self, from: data) }),
]
print("document: \(bytes.count) bytes, \(rounds) rounds, median per parse")
for (name, milliseconds) in results {
    let padded = name.padding(toLength: 32, withPad: " ", startingAt: 0)
    print("  \(padded) \(String(format: "%7.2f", milliseconds)) ms  \(String(format: "%6.1f", megabytes / (milliseconds / 1000))) MB/s")
}
