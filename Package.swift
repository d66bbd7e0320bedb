// swift-tools-version: 6.2
//
// fleetset — app settings for fleets of Linux devices.
//
// Targets are split by concern (see docs/internals/layout.md):
//   CCurl  – system-library module: libcurl's headers plus typed shims for its variadic calls.
//   CEventPoll – system-library module: Linux's epoll and eventfd (the transfer thread's wait).
//   Curl   – the only Swift code that touches libcurl: an async HTTP client on one curl_multi thread.
//   FleetJSON – JSON values and a strict RFC 8259 reader and writer (no Foundation).
//   CurlBenchmark – release-build benchmark of Curl against libcurl used from C (Benchmarks/run).
//   JSONBenchmark – FleetJSON's reader against Foundation's on a 1 MB document.

import PackageDescription

/// Swift settings shared by every first-party target.
///
/// Swift 6 language mode already implies complete strict-concurrency checking. Warnings become
/// errors when the `CI` environment variable is set (as `.ci/run` does), so a fresh clone that
/// passes CI is warning-free, while a local edit-compile loop is not interrupted by them.
var fleetSwiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]
if Context.environment["CI"] != nil || Context.environment["FLEETSET_WERROR"] != nil {
    fleetSwiftSettings.append(.treatAllWarnings(as: .error))
}

let package = Package(
    name: "fleetset",
    products: [
        .executable(name: "fleetset", targets: ["fleetset"]),
        .executable(name: "fleetset-server", targets: ["fleetset-server"]),
        .executable(name: "fleetsetd", targets: ["fleetsetd"]),
        .executable(name: "fleetset-sim", targets: ["fleetset-sim"]),
        .library(name: "Curl", targets: ["Curl"]),
        .library(name: "FleetJSON", targets: ["FleetJSON"]),
        .library(name: "FleetSchema", targets: ["FleetSchema"]),
        .library(name: "FleetMetadata", targets: ["FleetMetadata"]),
        // For apps: read settings, watch changes, change writable ones, acknowledge revisions.
        .library(name: "FleetSettings", targets: ["FleetSettings"]),
        // FleetSettings as a provider for apple/swift-configuration's ConfigReader.
        .library(name: "FleetSettingsConfiguration", targets: ["FleetSettingsConfiguration"]),
        // The fuzz targets, for libFuzzer harnesses built outside this package (with sanitizers).
        .library(name: "FleetFuzzTargets", targets: ["FleetFuzzTargets"]),
    ],
    dependencies: [
        // Test-only: the real HTTPS (HTTP/1.1 + HTTP/2, mutual TLS) server the client tests talk to.
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        // The server's own HTTP/1.1 connection handler (parked long-polls) sits on NIO's HTTP codec.
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        // The server's slow-client guard reads HTTP parts (NIOHTTPTypes), as Hummingbird does.
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        // HTTP statuses as values in the server's core (its errors carry one), without an HTTP server.
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-configuration.git", from: "1.4.0", traits: []),
        // The server's metrics: recorded through swift-metrics, served in Prometheus' text format.
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        // The PostgreSQL store, for several server instances sharing one database.
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/vapor/jwt-kit.git", from: "5.8.0"),
        .package(url: "https://github.com/swift-extras/swift-extras-base64.git", from: "1.2.0"),
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
        // Settings as code: the tree `fleetset admin export` writes and `plan`/`apply` read (CLI only).
        .package(url: "https://github.com/jpsim/Yams.git", from: "6.2.2"),
    ],
    targets: [
        .systemLibrary(
            name: "CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),
        .systemLibrary(name: "CEventPoll"),
        .target(
            name: "Curl",
            dependencies: ["CCurl", "CEventPoll", "PosixThreads"],
            swiftSettings: fleetSwiftSettings
        ),
        .target(
            name: "FleetJSON",
            swiftSettings: fleetSwiftSettings
        ),
        .target(
            name: "ECMARegex",
            swiftSettings: fleetSwiftSettings
        ),
        .target(name: "CThreadStack"),
        // glibc's malloc_trim, for the server to give back what a burst of requests left free.
        .target(name: "CHeap"),
        // Threads and locks on pthreads: a detached thread for blocking work, and the lock fleetset's
        // own code uses (a pthread mutex, which ThreadSanitizer can see).
        .target(name: "PosixThreads", swiftSettings: fleetSwiftSettings),
        .target(
            name: "FleetIO",
            swiftSettings: fleetSwiftSettings
        ),
        .target(
            name: "FleetSchema",
            dependencies: ["FleetJSON", "ECMARegex", "CThreadStack"],
            swiftSettings: fleetSwiftSettings
        ),
        // Schema documents read from folders (the official suite's remotes, `fleetset schema test`).
        .target(
            name: "FleetSchemaFiles",
            dependencies: ["FleetSchema", "FleetJSON", "FleetIO"],
            swiftSettings: fleetSwiftSettings
        ),
        .target(
            name: "FleetMetadata",
            dependencies: ["FleetJSON", "FleetSchema"],
            swiftSettings: fleetSwiftSettings
        ),
        // The on-device settings editor as values: screens drawn from the layout, keys in,
        // effects out (`fleetset edit` drives it on a terminal).
        .target(
            name: "FleetEditor",
            dependencies: ["FleetJSON", "FleetMetadata", "FleetSchema"],
            swiftSettings: fleetSwiftSettings
        ),
        .testTarget(
            name: "FleetEditorTests",
            dependencies: ["FleetEditor", "FleetMetadata", "FleetJSON"],
            swiftSettings: fleetSwiftSettings
        ),
        // Settings as code as values: the tree of files `fleetset admin export` writes (YAML with
        // Yams, metadata as JSON), read back with file and line in every error, and the plan
        // between a tree and the server's state. No I/O beyond the tree's own files; no HTTP.
        .target(
            name: "FleetSettingsAsCode",
            dependencies: ["FleetJSON", "FleetProtocol", "FleetIO", .product(name: "Yams", package: "Yams")],
            swiftSettings: fleetSwiftSettings
        ),
        .testTarget(
            name: "FleetSettingsAsCodeTests",
            dependencies: ["FleetSettingsAsCode", "FleetJSON", "FleetProtocol", "FleetIO"],
            swiftSettings: fleetSwiftSettings
        ),
        .testTarget(
            name: "FleetMetadataTests",
            dependencies: ["FleetMetadata", "FleetSchema", "FleetJSON", "FleetIO"],
            swiftSettings: fleetSwiftSettings
        ),
        .executableTarget(
            name: "fleetset",
            dependencies: [
                "FleetJSON", "FleetSchema", "FleetSchemaFiles", "FleetMetadata", "FleetIO", "FleetProtocol", "FleetClient", "Curl",
                "FleetDeviceState", "FleetDeviceFiles", "FleetSettings", "FleetVersion", "FleetEditor", "FleetSettingsAsCode",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: fleetSwiftSettings
        ),
        // The agent: the device's records as values (settings, status, changes, reports, inbox
        // requests; no I/O), where they live on disk and how they are read and written (also used
        // by the CLI and the app library), its pure decisions and sync machine, the systemd notify
        // protocol, child processes for hooks, inotify, and the driver that performs the
        // machine's actions with the libcurl client.
        .target(
            name: "FleetDeviceState",
            dependencies: ["FleetJSON", "FleetProtocol"],
            swiftSettings: fleetSwiftSettings
        ),
        .target(
            name: "FleetDeviceFiles",
            dependencies: ["FleetDeviceState", "FleetIO", "FleetJSON", "FleetProtocol", "FleetMetadata", "PosixThreads"],
            swiftSettings: fleetSwiftSettings
        ),
        // Imports no file, process or network module: every rule of the agent as a value.
        .target(
            name: "FleetAgentCore",
            dependencies: ["FleetDeviceState", "FleetMetadata", "FleetProtocol", "FleetJSON", "FleetSchema"],
            // The machine is generic over its clock and its files: its bodies go with the module
            // so that the agent and the simulator each get it specialized to their own types
            // (unspecialized, a third of an applied change went to looking up generic metadata).
            swiftSettings: fleetSwiftSettings + [.unsafeFlags(["-cross-module-optimization"], .when(configuration: .release))]
        ),
        .target(name: "SystemdNotify", swiftSettings: fleetSwiftSettings),
        // The version, generated from the VERSION file (Plugins/VersionFile).
        .target(name: "FleetVersion", swiftSettings: fleetSwiftSettings, plugins: ["VersionFile"]),
        .plugin(name: "VersionFile", capability: .buildTool()),
        // posix_spawn's close-from action, which glibc declares only with _GNU_SOURCE.
        .target(name: "CSpawn"),
        .target(name: "ChildProcess", dependencies: ["FleetIO", "PosixThreads", "CSpawn"], swiftSettings: fleetSwiftSettings),
        .target(name: "FileWatch", dependencies: ["FleetIO", "PosixThreads"], swiftSettings: fleetSwiftSettings),
        // The sync machine's requests sent with FleetClient, shared by the agent and the simulator.
        .target(
            name: "FleetAgentRequests",
            dependencies: ["FleetAgentCore", "FleetClient", "FleetJSON", "FleetProtocol"],
            swiftSettings: fleetSwiftSettings
        ),
        .target(
            name: "FleetAgent",
            dependencies: [
                "FleetAgentCore", "FleetAgentRequests", "FleetDeviceState", "FleetDeviceFiles", "FleetClient", "Curl", "FleetIO",
                "FleetJSON", "FleetMetadata",
                "FleetProtocol",
                "FleetSchema", "SystemdNotify", "ChildProcess", "FileWatch", "PosixThreads", "FleetVersion",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                // HMAC-SHA256 of the machine id: the device facts name a device without revealing it.
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: fleetSwiftSettings
        ),
        .executableTarget(
            name: "fleetsetd",
            dependencies: [
                "FleetAgent", "FleetDeviceFiles", "FleetLogging", "SystemdNotify",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            swiftSettings: fleetSwiftSettings
        ),
        // The app library: the device's files, inotify; no libcurl, no networking.
        .target(
            name: "FleetSettings",
            dependencies: ["FleetDeviceState", "FleetDeviceFiles", "FleetMetadata", "FleetJSON", "FleetIO", "FleetProtocol", "FileWatch"],
            swiftSettings: fleetSwiftSettings
        ),
        .target(
            name: "FleetSettingsConfiguration",
            dependencies: ["FleetSettings", "FleetJSON", "PosixThreads", .product(name: "Configuration", package: "swift-configuration")],
            swiftSettings: fleetSwiftSettings
        ),
        .testTarget(
            name: "FleetSettingsTests",
            dependencies: [
                "FleetSettings", "FleetSettingsConfiguration", "FleetDeviceState", "FleetDeviceFiles", "FleetJSON", "FleetIO",
                "FleetMetadata",
                .product(name: "Configuration", package: "swift-configuration"),
            ],
            swiftSettings: fleetSwiftSettings
        ),
        .testTarget(
            name: "FleetAgentCoreTests",
            dependencies: [
                "FleetAgentCore", "FleetDeviceState", "FleetDeviceFiles", "FleetMetadata", "FleetProtocol", "FleetJSON", "FleetIO",
            ],
            swiftSettings: fleetSwiftSettings
        ),
        .testTarget(
            name: "AgentSystemTests",
            dependencies: ["ChildProcess", "SystemdNotify", "FileWatch", "FleetIO"],
            swiftSettings: fleetSwiftSettings
        ),
        .target(
            name: "FleetProtocol",
            dependencies: ["FleetJSON", "ECMARegex"],
            swiftSettings: fleetSwiftSettings
        ),
        .testTarget(
            name: "FleetProtocolTests",
            dependencies: ["FleetProtocol", "FleetJSON"],
            swiftSettings: fleetSwiftSettings
        ),
        .target(
            name: "FleetServerCore",
            dependencies: [
                "FleetJSON", "FleetMetadata", "FleetProtocol", "FleetSchema", "PosixThreads", "FleetWebhooks",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            swiftSettings: fleetSwiftSettings
        ),
        .target(
            name: "FleetClient",
            dependencies: ["Curl", "FleetJSON", "FleetProtocol"],
            swiftSettings: fleetSwiftSettings
        ),
        .target(
            name: "FleetLogging",
            dependencies: ["FleetIO", .product(name: "Logging", package: "swift-log")],
            swiftSettings: fleetSwiftSettings
        ),
        // Single sign-on as values: PKCE, the provider's discovery document, ID tokens checked
        // (JWTKit), groups mapped to roles, the CLI's device-grant poll. No HTTP.
        .target(
            name: "FleetSSO",
            dependencies: [
                "FleetJSON", "FleetProtocol",
                .product(name: "JWTKit", package: "jwt-kit"), .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "ExtrasBase64", package: "swift-extras-base64"),
            ],
            swiftSettings: fleetSwiftSettings
        ),
        .testTarget(
            name: "FleetSSOTests",
            dependencies: [
                "FleetSSO", "FleetClient", "FleetJSON", "FleetProtocol", "Curl", "FleetTestSupport",
                .product(name: "JWTKit", package: "jwt-kit"),
            ],
            swiftSettings: fleetSwiftSettings
        ),
        // Outbound events as values: Standard Webhooks secrets, signatures and messages, the
        // retry schedule, and which destinations may be called (no server-side request forgery).
        .target(
            name: "FleetWebhooks",
            dependencies: [
                "FleetJSON", .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "ExtrasBase64", package: "swift-extras-base64"),
            ],
            swiftSettings: fleetSwiftSettings
        ),
        .testTarget(
            name: "FleetWebhooksTests",
            dependencies: ["FleetWebhooks", "FleetJSON", "FleetTestSupport"],
            exclude: ["Scripts"],
            swiftSettings: fleetSwiftSettings
        ),
        // The admin console as values: HTML pages drawn from the service's answers and the
        // metadata's layout, forms read back into merge patches, sessions and CSRF tokens.
        .target(
            name: "FleetConsole",
            dependencies: [
                "FleetServerCore", "FleetMetadata", "FleetJSON", "FleetProtocol", "PosixThreads",
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            exclude: ["Assets"],
            swiftSettings: fleetSwiftSettings,
            plugins: ["ConsoleAssets"]
        ),
        .plugin(name: "ConsoleAssets", capability: .buildTool()),
        .target(
            name: "FleetServer",
            dependencies: [
                "FleetServerCore", "FleetConsole", "FleetMetadata", "FleetProtocol", "FleetJSON", "FleetIO", "PosixThreads", "FleetSSO",
                "Curl", "FleetWebhooks", "CHeap",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "HummingbirdHTTP2", package: "hummingbird"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            swiftSettings: fleetSwiftSettings
        ),
        .executableTarget(
            name: "fleetset-server",
            dependencies: [
                "FleetServer", "FleetServerCore", "FleetProtocol", "FleetStoreSQLite", "FleetStorePostgres", "FleetLogging", "FleetIO",
                "FleetVersion", "SystemdNotify", "FleetSSO", "FleetWebhooks",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: fleetSwiftSettings
        ),
        // The fleet simulator: thousands of devices behaving as the agent does, with fleetset's own
        // client, against a server it can start, kill and measure (docs/internals/simulator.md).
        .target(
            name: "FleetSimulator",
            dependencies: [
                "FleetAgentCore", "FleetAgentRequests", "FleetDeviceState", "FleetMetadata", "FleetClient", "Curl", "FleetProtocol",
                "FleetJSON", "FleetIO", "PosixThreads", "ChildProcess",
            ],
            swiftSettings: fleetSwiftSettings
        ),
        .executableTarget(
            name: "fleetset-sim",
            dependencies: [
                "FleetSimulator", "FleetClient", "Curl", "FleetIO", "FleetJSON",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: fleetSwiftSettings
        ),
        .testTarget(
            name: "FleetSimulatorTests",
            dependencies: [
                "FleetSimulator", "FleetAgentCore", "FleetProtocol", "FleetJSON", "FleetClient", "Curl", "FleetTestSupport",
                "fleetset-server",
            ],
            swiftSettings: fleetSwiftSettings
        ),
        .testTarget(
            name: "FleetServerTests",
            dependencies: [
                "FleetServer", "FleetServerCore", "FleetConsole", "FleetStoreSQLite", "FleetStorePostgres", "FleetProtocol", "FleetJSON",
                "FleetLogging",
                "ChildProcess",
                // The binary itself: the alerts' end-to-end test runs `fleetset-server serve`.
                "fleetset-server",
                "Curl", "FleetClient", "FleetMetadata", "FleetIO", "PosixThreads", "FleetTestSupport", "FleetWebhooks",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            swiftSettings: fleetSwiftSettings
        ),
        .testTarget(
            name: "FleetConsoleTests",
            dependencies: [
                "FleetConsole", "FleetServerCore", "FleetMetadata", "FleetJSON", "FleetProtocol", "PosixThreads",
                .product(name: "Logging", package: "swift-log"), .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            exclude: ["QRCode/Scripts"],
            swiftSettings: fleetSwiftSettings
        ),
        .target(
            name: "FleetStoreSQLite",
            dependencies: ["FleetServerCore", "FleetJSON", "FleetProtocol", .product(name: "GRDB", package: "GRDB.swift")],
            swiftSettings: fleetSwiftSettings
        ),
        // The store on PostgreSQL, for several server instances over one database: migrations
        // under an advisory lock, the cross-instance write lock, LISTEN/NOTIFY of changes.
        .target(
            name: "FleetStorePostgres",
            dependencies: [
                "FleetServerCore", "FleetJSON", "FleetProtocol", "PosixThreads",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: fleetSwiftSettings
        ),
        .testTarget(
            name: "FleetStoreSQLiteTests",
            dependencies: ["FleetStoreSQLite", "FleetServerCore", "FleetProtocol", "FleetJSON"],
            swiftSettings: fleetSwiftSettings
        ),
        // One suite for every store: each test runs against SQLite and a throw-away PostgreSQL.
        .testTarget(
            name: "FleetStoreConformanceTests",
            dependencies: [
                "FleetStoreSQLite", "FleetStorePostgres", "FleetServerCore", "FleetProtocol", "FleetJSON", "FleetTestSupport",
                "FleetWebhooks",
                .product(name: "Logging", package: "swift-log"),
                // To take a database back to an older schema, as a fleet upgrading from it has it.
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            swiftSettings: fleetSwiftSettings
        ),
        .testTarget(
            name: "FleetIOTests",
            dependencies: ["FleetIO"],
            swiftSettings: fleetSwiftSettings
        ),
        .testTarget(
            name: "FleetServerCoreTests",
            dependencies: [
                "FleetServerCore", "FleetMetadata", "FleetJSON", "FleetProtocol", "PosixThreads", "FleetWebhooks", "FleetTestWaiting",
                .product(name: "Logging", package: "swift-log"), .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            swiftSettings: fleetSwiftSettings
        ),
        .testTarget(
            name: "FleetsetCLITests",
            dependencies: ["fleetset", "fleetset-server", "FleetClient", "Curl", "FleetProtocol", "FleetJSON", "FleetTestSupport"],
            swiftSettings: fleetSwiftSettings
        ),
        // Test support shared by the test targets that run the built binaries.
        .target(
            name: "FleetTestSupport",
            dependencies: ["PosixThreads", "ChildProcess", "Curl", "FleetTestWaiting"],
            path: "Tests/FleetTestSupport",
            swiftSettings: fleetSwiftSettings
        ),
        // Bounded waits for any test target: depends on nothing, so that the tests of a core
        // module or of the HTTP client need not reach libcurl or child processes for them.
        .target(
            name: "FleetTestWaiting",
            path: "Tests/FleetTestWaiting",
            swiftSettings: fleetSwiftSettings
        ),
        // The agent run as a process against the real server on 127.0.0.1 (and, for faults no
        // real server makes, a proxy in front of it).
        .testTarget(
            name: "FleetAgentTests",
            dependencies: [
                "fleetsetd", "fleetset", "fleetset-server", "FleetAgent", "FleetAgentCore", "FleetTestSupport", "FleetClient", "Curl",
                "FleetProtocol", "FleetJSON",
                "FleetMetadata", "FleetDeviceState", "FleetDeviceFiles", "FleetIO", "FleetSettings", "PosixThreads",
                .product(name: "Hummingbird", package: "hummingbird"),
            ],
            swiftSettings: fleetSwiftSettings
        ),
        .testTarget(
            name: "ECMARegexTests",
            dependencies: ["ECMARegex"],
            swiftSettings: fleetSwiftSettings
        ),
        .testTarget(
            name: "FleetSchemaTests",
            dependencies: ["FleetSchema", "FleetSchemaFiles", "FleetJSON", "FleetIO"],
            swiftSettings: fleetSwiftSettings
        ),
        .testTarget(
            name: "FleetJSONTests",
            dependencies: ["FleetJSON"],
            swiftSettings: fleetSwiftSettings
        ),
        .executableTarget(
            name: "CurlBenchmark",
            dependencies: ["Curl"],
            path: "Benchmarks/CurlBenchmark",
            swiftSettings: fleetSwiftSettings
        ),
        .executableTarget(
            name: "JSONBenchmark",
            dependencies: ["FleetJSON"],
            path: "Benchmarks/JSONBenchmark",
            swiftSettings: fleetSwiftSettings
        ),
        .executableTarget(
            name: "AgentBenchmark",
            dependencies: [
                "Curl", "FleetAgentCore", "FleetDeviceState", "FleetClient", "FleetJSON", "FleetProtocol", "FleetIO", "FileWatch",
            ],
            path: "Benchmarks/AgentBenchmark",
            swiftSettings: fleetSwiftSettings
        ),
        // The fuzz targets (FuzzReplayTests replays the corpora in Fuzz/corpus through them).
        .target(
            name: "FleetFuzzTargets",
            dependencies: [
                "ECMARegex", "FleetDeviceState", "FleetDeviceFiles", "FleetJSON", "FleetMetadata", "FleetProtocol", "FleetSchema",
            ],
            swiftSettings: fleetSwiftSettings
        ),
        .testTarget(
            name: "FuzzReplayTests",
            dependencies: ["FleetFuzzTargets"],
            swiftSettings: fleetSwiftSettings
        ),
        .executableTarget(
            name: "WebhookBenchmark",
            dependencies: [
                "FleetJSON", "FleetServerCore", "FleetStoreSQLite", "FleetProtocol", .product(name: "Logging", package: "swift-log"),
            ],
            path: "Benchmarks/WebhookBenchmark",
            swiftSettings: fleetSwiftSettings
        ),
        .executableTarget(
            name: "SecurityBenchmark",
            dependencies: [
                "ECMARegex", "FleetJSON", "FleetSchema", "FleetServerCore", "FleetStoreSQLite", "FleetProtocol",
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Benchmarks/SecurityBenchmark",
            swiftSettings: fleetSwiftSettings
        ),
        .executableTarget(
            name: "ConsoleBenchmark",
            dependencies: [
                "FleetConsole", "FleetJSON", "FleetProtocol", "FleetServerCore", "FleetStoreSQLite",
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Benchmarks/ConsoleBenchmark",
            swiftSettings: fleetSwiftSettings
        ),
        .executableTarget(
            name: "ServerBenchmark",
            dependencies: ["Curl", "FleetClient", "FleetJSON", "FleetProtocol"],
            path: "Benchmarks/ServerBenchmark",
            swiftSettings: fleetSwiftSettings
        ),
        .testTarget(
            name: "CurlTests",
            dependencies: [
                "Curl", "FleetTestWaiting",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "HummingbirdHTTP2", package: "hummingbird"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: fleetSwiftSettings
        ),
    ],
    swiftLanguageModes: [.v6]
)
