// Parse + validate benchmarks for FleetSchema, compared by `run` with Python's `jsonschema` on
// the same schema and documents (Fixtures/, written by make-fixtures.py).

import Benchmark
import FleetIO
import FleetJSON
import FleetSchema

private let fixtures: String = {
    var components = "\(#filePath)".split(separator: "/", omittingEmptySubsequences: false)
    components.removeLast(3)  // SchemaValidation.swift, SchemaValidation, Benchmarks
    return components.joined(separator: "/") + "/Fixtures"
}()

private func load(_ name: String) -> [UInt8] {
    do {
        return try FileSystem.readFile(fixtures + "/" + name)
    } catch {
        fatalError("\(error); run make-fixtures.py first")
    }
}

let benchmarks: @Sendable () -> Void = {
    let schemaDocument: JSONValue
    do {
        schemaDocument = try JSONParser.parse(load("schema.json"))
    } catch {
        fatalError("schema.json: \(error)")
    }
    let schema: JSONSchema
    do {
        schema = try JSONSchema(schemaDocument)
    } catch {
        fatalError("schema.json: \(error)")
    }
    let documents = [("10 KB, 100 settings", load("small.json")), ("1 MB", load("large.json"))]
    let configuration = Benchmark.Configuration(
        metrics: [.wallClock, .throughput, .mallocCountTotal, .peakMemoryResident], maxDuration: .seconds(5), maxIterations: 2_000)

    for (name, bytes) in documents {
        Benchmark("parse + validate \(name)", configuration: configuration) { benchmark in
            for _ in benchmark.scaledIterations {
                do {
                    let errors = schema.validate(try JSONParser.parse(bytes))
                    precondition(errors.isEmpty, "the fixture must be valid: \(errors.prefix(3))")
                    blackHole(errors)
                } catch {
                    fatalError("\(error)")
                }
            }
        }
        let parsed: JSONValue
        do { parsed = try JSONParser.parse(bytes) } catch { fatalError("\(error)") }
        Benchmark("validate \(name)", configuration: configuration) { benchmark in
            for _ in benchmark.scaledIterations {
                blackHole(schema.validate(parsed))
            }
        }
    }
    Benchmark("compile the 100-setting schema", configuration: configuration) { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(try? JSONSchema(schemaDocument))
        }
    }
}
