#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// An open file descriptor with exactly one owner, closed exactly once: when the owner lets go
/// of it, or earlier with ``close()``. It cannot be copied, so no second owner can close it
/// again (or close a number the kernel has handed out anew meanwhile).
///
/// swift-system's `FileDescriptor` is a copyable handle that its users close by hand; the
/// ownership is what is wanted here, so fleetset keeps this small type instead.
public struct OwnedDescriptor: ~Copyable, Sendable {
    /// The descriptor's number, for system calls; valid while this value lives.
    public let raw: Int32

    /// Takes ownership of `raw`, an open descriptor nothing else will close.
    public init(taking raw: Int32) { self.raw = raw }

    deinit { _ = Glibc.close(raw) }

    /// Closes the descriptor now.
    public consuming func close() {
        let raw = self.raw
        discard self
        _ = Glibc.close(raw)
    }
}

/// The two ends of a pipe, each with its owner.
public struct PipeEnds: ~Copyable, Sendable {
    public let reader: OwnedDescriptor
    public let writer: OwnedDescriptor

    /// Closes the write end and returns the read end: the parent's side, once a child it
    /// started holds its own copy of the write end.
    public consuming func closingWriter() -> OwnedDescriptor {
        let reader = self.reader
        writer.close()
        return reader
    }
}

/// Runs a system call again while it fails with `EINTR`: the one place fleetset retries an
/// interrupted call.
@inline(__always)
public func retryingOnInterrupt<Result: BinaryInteger>(_ call: () -> Result) -> Result {
    while true {
        let result = call()
        if result >= 0 || errno != EINTR { return result }
    }
}
