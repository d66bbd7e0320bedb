import FleetIO
import PosixThreads

#if canImport(Glibc)
import Glibc
#endif

/// Reports files that appear in directories, through inotify, on a thread of its own.
///
/// A file "appears" when it is renamed into a watched directory (`IN_MOVED_TO`, how files
/// written atomically arrive) or when a writer closes it (`IN_CLOSE_WRITE`); a name that is
/// merely created (`IN_CREATE`: a file still being written, or a link) is reported as
/// ``Event/created(directory:name:)``, and a name removed or renamed away (`IN_DELETE`,
/// `IN_MOVED_FROM`) as ``Event/removed(directory:name:)``. When the kernel's event queue overflows, or the 4096
/// events this watcher buffers for a slow reader do, ``Event/overflow`` says so: rescan the
/// directories.
///
/// ```swift
/// let watcher = try DirectoryWatcher(directories: ["/var/spool/fleetset/kiosk"])
/// for await event in watcher.events { … }
/// ```
public final class DirectoryWatcher: Sendable {
    /// Something that happened in a watched directory.
    public enum Event: Sendable, Hashable {
        /// A complete file named `name` appeared in `directory`.
        case appeared(directory: String, name: String)
        /// A name was created in `directory`; a regular file may still be being written.
        case created(directory: String, name: String)
        /// A name was removed from `directory`, or renamed out of it.
        case removed(directory: String, name: String)
        /// Events were lost; look at the directories again.
        case overflow
    }

    /// How many events wait for a slow reader before the oldest are dropped (and an overflow added).
    static let bufferSize = 4096

    /// The events, in order. Ends after ``stop()``.
    public let events: AsyncStream<Event>
    private let continuation: AsyncStream<Event>.Continuation
    private let inotify: OwnedDescriptor
    /// A pipe: a byte written to its writer wakes the thread to stop.
    private let stopSignal: PipeEnds
    private let watches: [Int32: String]
    private let stopped = Locked(false)

    /// Starts watching `directories` (which must exist).
    ///
    /// - Throws: ``FleetIO/FileError`` (operation `watch`) naming the directory that cannot be watched.
    public init(directories: [String]) throws(FileError) {
        // Every descriptor has one owner: whichever way this ends, each is closed once.
        let created = inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK))
        guard created >= 0 else { throw FileError(path: "", operation: "watch directories", call: "inotify_init1", code: errno) }
        let inotify = OwnedDescriptor(taking: created)
        var watches: [Int32: String] = [:]
        for directory in directories {
            let watch = inotify_add_watch(
                inotify.raw, directory, UInt32(IN_MOVED_TO | IN_CLOSE_WRITE | IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_ONLYDIR))
            guard watch >= 0 else { throw FileError(path: directory, operation: "watch", call: "inotify_add_watch", code: errno) }
            watches[watch] = directory
        }
        let stopSignal: PipeEnds
        do {
            stopSignal = try FileSystem.makePipe(nonBlocking: true)
        } catch {
            throw FileError(path: "", operation: "watch directories", call: "pipe", code: error.code)
        }
        self.inotify = inotify
        self.stopSignal = stopSignal
        self.watches = watches
        (events, continuation) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .bufferingNewest(Self.bufferSize))

        let started = DetachedThread.start(named: "fleetset-watch") { [self] in readLoop() }
        guard started == 0 else { throw FileError(path: "", operation: "watch directories", call: "pthread_create", code: started) }
    }

    /// Stops the thread and ends ``events``.
    public func stop() {
        let first = stopped.withLock { stopped in
            defer { stopped = true }
            return !stopped
        }
        guard first else { return }
        var one: UInt8 = 1
        _ = retryingOnInterrupt { write(stopSignal.writer.raw, &one, 1) }
    }

    private func readLoop() {
        defer { continuation.finish() }
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        var sinceOverflow = Int.max
        while true {
            var descriptors = [
                pollfd(fd: inotify.raw, events: Int16(POLLIN), revents: 0),
                pollfd(fd: stopSignal.reader.raw, events: Int16(POLLIN), revents: 0),
            ]
            guard retryingOnInterrupt({ poll(&descriptors, 2, -1) }) >= 0 else { return }
            if descriptors[1].revents != 0 { return }
            let count = buffer.withUnsafeMutableBytes { buffer in
                retryingOnInterrupt { read(inotify.raw, buffer.baseAddress, buffer.count) }
            }
            if count < 0 {
                if errno == EAGAIN { continue }
                return
            }
            parse(buffer[..<count], sinceOverflow: &sinceOverflow)
        }
    }

    /// Yields the events in `bytes`. `sinceOverflow` counts the events yielded after the last
    /// overflow this watcher added for a slow reader: while it is below the buffer's size, that
    /// overflow is still buffered and covers events dropped since.
    private func parse(_ bytes: ArraySlice<UInt8>, sinceOverflow: inout Int) {
        let headerSize = MemoryLayout<inotify_event>.size
        var offset = bytes.startIndex
        while offset + headerSize <= bytes.endIndex {
            let (watch, mask, nameLength) = bytes.withUnsafeBytes { raw in
                let base = raw.baseAddress! + (offset - bytes.startIndex)
                let event = base.loadUnaligned(as: inotify_event.self)
                return (event.wd, event.mask, Int(event.len))
            }
            let nameStart = offset + headerSize
            let name = String(decoding: bytes[nameStart..<min(nameStart + nameLength, bytes.endIndex)].prefix { $0 != 0 }, as: UTF8.self)
            offset = nameStart + nameLength
            if mask & UInt32(IN_Q_OVERFLOW) != 0 {
                continuation.yield(.overflow)
            } else if let directory = watches[watch], !name.isEmpty, mask & UInt32(IN_ISDIR) == 0 {
                let event: Event =
                    if mask & UInt32(IN_DELETE | IN_MOVED_FROM) != 0 {
                        .removed(directory: directory, name: name)
                    } else if mask & UInt32(IN_CREATE) != 0 {
                        .created(directory: directory, name: name)
                    } else {
                        .appeared(directory: directory, name: name)
                    }
                let result = continuation.yield(event)
                sinceOverflow = sinceOverflow == Int.max ? Int.max : sinceOverflow + 1
                // A reader too slow for a flood of events lost the oldest: tell it to look again,
                // unless an overflow that covers the loss is still buffered.
                if case .dropped = result, sinceOverflow >= Self.bufferSize - 1 {
                    continuation.yield(.overflow)
                    sinceOverflow = 0
                }
            }
        }
    }
}
