// swift-tools-version: 6.2
//
// Schema validation benchmarks (package-benchmark), kept out of the main package so that CI and
// `swift build` never pull the benchmark tool chain. Run them with `Benchmarks/SchemaBenchmark/run`,
// which also runs the Python `jsonschema` baseline on the same schema and documents.

import PackageDescription

let package = Package(
    name: "SchemaBenchmark",
    dependencies: [
        .package(name: "fleetset", path: "../.."),
        .package(url: "https://github.com/ordo-one/benchmark.git", from: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        .executableTarget(
            name: "SchemaValidation",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "FleetJSON", package: "fleetset"),
                .product(name: "FleetSchema", package: "fleetset"),
            ],
            path: "Benchmarks/SchemaValidation",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        )
    ],
    swiftLanguageModes: [.v6]
)
