import FleetFuzzTargets

// The libFuzzer entry point of every fleetset fuzz harness. `Fuzz/run` links this file with
// `-sanitize=fuzzer,address` against the instrumented targets and a one-line file that names the
// target (`let harnessTargetName = "json"`), so the six harnesses share this code.

/// The target this harness drives, looked up once.
let harnessTarget: @Sendable ([UInt8]) -> Void = {
    guard let target = FuzzTargets.all.first(where: { $0.name == harnessTargetName })?.run else {
        fatalError("no fuzz target named \(harnessTargetName)")
    }
    return target
}()

/// Called by libFuzzer with each input it tries.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    harnessTarget(bytes)
    return 0
}
