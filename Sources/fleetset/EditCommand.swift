import ArgumentParser
import Curl
import FleetClient
import FleetDeviceFiles
import FleetDeviceState
import FleetEditor
import FleetJSON
import FleetMetadata
import FleetProtocol
import FleetSettings

#if canImport(Glibc)
import Glibc
#endif

/// `fleetset edit [--app ID]`: the app's settings in a full-screen terminal editor.
struct EditCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "edit",
        abstract: "Edit the app's writable settings in a full-screen terminal editor drawn from its layout.",
        discussion: """
            Keyboard only; fits an 80x24 terminal and works over SSH. Up/down (or j/k) move, Enter \
            (or right) edits a setting or opens a pane or list, Esc (or left) goes back. Space \
            toggles a boolean; Enter on a choice lists its options. In a list, a adds an item, d \
            removes one, [ and ] move it. Every value is checked against the schema as it is typed. \
            s saves: the changed settings go through the agent's inbox, and the editor waits for \
            the server's confirmation, as set --wait does. q quits (twice with unsaved changes). \
            Settings that are not x-writable are shown read-only with where they come from; \
            secrets are typed hidden and never shown.
            """)

    @OptionGroup var device: DeviceOptions

    @Option(help: "Seconds a save waits for the server's confirmation.")
    var timeout: Double = 30

    func run() async throws {
        let configuration = try device.configuration()
        let app = try device.selectedApp(in: configuration)
        let (settings, metadata) = try device.settings(of: app, in: configuration)
        guard isatty(STDIN_FILENO) == 1, isatty(STDOUT_FILENO) == 1 else {
            StandardError.write("fleetset edit: needs a terminal (use fleetset set in scripts)")
            throw CLIExit.usageOrIO
        }
        let sources = await Self.sources(app: app.id, configuration: configuration)
        var editor = SettingsEditor(
            app: app.id, metadata: metadata, revision: settings.revision, values: settings.values, sources: sources)
        let terminal: RawTerminal
        do {
            terminal = try RawTerminal()
        } catch {
            StandardError.write("fleetset edit: \(error)")
            throw CLIExit.usageOrIO
        }
        defer { terminal.restore() }
        var decoder = KeyDecoder()
        while true {
            let (width, height) = terminal.size
            terminal.draw(EditorScreen.render(editor, width: width, height: height))
            guard let bytes = terminal.read(waitingUpTo: decoder.isHolding ? 50 : 1000) else { return }  // the terminal went away
            let keys = bytes.isEmpty ? decoder.flush() : decoder.keys(from: bytes)
            for key in keys {
                switch editor.handle(key) {
                case .quit?:
                    return
                case .save(let patch)?:
                    terminal.draw(EditorScreen.render(editor, width: width, height: height))
                    await save(patch, editor: &editor, app: app, configuration: configuration, metadata: metadata)
                case nil:
                    break
                }
            }
        }
    }

    /// Submits `patch` through the inbox and waits for its outcome, then shows it.
    private func save(
        _ patch: JSONObject, editor: inout SettingsEditor, app: AppConfiguration, configuration: AgentConfiguration, metadata: Metadata
    ) async {
        let fleetApp = device.fleetApp(app, configuration)
        let current = SettingsOnDisk.load(configuration.layout.settingsFile(app.id), app: app.id).settings?.values ?? editor.original
        let request: ChangeRequest
        do {
            request = try fleetApp.submit(patch, checkedAgainst: current, metadata: metadata)
        } catch {
            editor.status = "not saved: \(error)"
            return
        }
        switch await request.outcome(waitingUpTo: .milliseconds(Int64(timeout * 1000))) {
        case .applied(let revision):
            let saved = SettingsOnDisk.load(configuration.layout.settingsFile(app.id), app: app.id).settings
            editor.saved(revision: saved?.revision ?? revision, values: saved?.values ?? editor.draft)
        case .refused(let reason):
            editor.status = "refused: \(reason)"
        case .pending:
            editor.status = "still pending after \(Int(timeout)) s; the agent keeps it queued (fleetset status)"
        case .superseded(let successor, _):
            editor.status = "superseded by \(successor) before it was sent"
        case .unknown:
            editor.status = "the agent refused the request (see its log)"
        }
    }

    /// Where each value of the device comes from, as the server says (`fleetset explain`); none
    /// when the server cannot be asked now (the editor works offline, read-only settings then
    /// show no source).
    static func sources(app: String, configuration: AgentConfiguration) async -> [String: String] {
        guard let identity = try? DeviceIdentity.load(configuration.layout.identityFile) else { return [:] }
        var limits = TransferLimits(maxResponseBytes: 4 << 20)
        limits.timeout = .seconds(3)
        let http = HTTPClient.Configuration(
            tls: .init(
                caFile: configuration.caFile, clientCertificateFile: configuration.clientCertificate,
                clientKeyFile: configuration.clientKey),
            allowInsecureHTTP: configuration.allowInsecureHTTP, limits: limits, userAgent: "fleetset-edit")
        return
            (try? await withHTTPClient(configuration: http) { client in
                try await FleetClient(http: client, baseURL: configuration.server, token: identity.deviceToken).explainSelf(app: app)
                    .sources
            }) ?? [:]
    }
}

/// The terminal in raw mode on the alternate screen, restored when done.
final class RawTerminal {
    private var saved = termios()

    /// Puts standard input in raw mode (no echo, no line editing, no signals from keys) and
    /// switches to the alternate screen with the cursor hidden.
    init() throws {
        guard tcgetattr(STDIN_FILENO, &saved) == 0 else { throw TerminalError(message: "cannot read the terminal's mode") }
        savedTerminalMode = saved
        // SIGTERM, SIGHUP, SIGQUIT: the terminal is given back before the process ends.
        for number in [SIGTERM, SIGHUP, SIGQUIT] { signal(number, restoreTerminalAndExit) }
        var raw = saved
        cfmakeraw(&raw)
        raw.c_oflag |= tcflag_t(OPOST)  // keep \n → \r\n for drawing
        guard tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw) == 0 else { throw TerminalError(message: "cannot set the terminal's mode") }
        write("\u{1b}[?1049h\u{1b}[?25l")
    }

    /// Back to the mode and screen it found.
    func restore() {
        write("\u{1b}[?25h\u{1b}[?1049l")
        _ = tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved)
    }

    /// Columns and lines (80×24 when the terminal does not say).
    var size: (width: Int, height: Int) {
        var window = winsize()
        guard ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &window) == 0, window.ws_col > 0, window.ws_row > 0 else { return (80, 24) }
        return (Int(window.ws_col), Int(window.ws_row))
    }

    /// Draws `lines` over the whole screen.
    func draw(_ lines: [String]) {
        write("\u{1b}[H" + lines.map { $0 + "\u{1b}[K" }.joined(separator: "\r\n") + "\u{1b}[J")
    }

    /// What the keyboard sent within `milliseconds` (empty: nothing); `nil` once the terminal
    /// is gone (end of input, a hang-up, an error).
    func read(waitingUpTo milliseconds: Int32) -> [UInt8]? {
        var descriptor = pollfd(fd: STDIN_FILENO, events: Int16(POLLIN), revents: 0)
        let ready = poll(&descriptor, 1, milliseconds)
        if ready < 0 { return errno == EINTR ? [] : nil }
        guard ready > 0 else { return [] }
        var buffer = [UInt8](repeating: 0, count: 256)
        let count = Glibc.read(STDIN_FILENO, &buffer, buffer.count)
        if count < 0 { return errno == EINTR || errno == EAGAIN ? [] : nil }
        return count == 0 ? nil : Array(buffer.prefix(count))
    }

    private func write(_ text: String) {
        var bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeMutableBytes { Glibc.write(STDOUT_FILENO, $0.baseAddress! + offset, $0.count - offset) }
            if written < 0 {
                if errno == EINTR { continue }
                return
            }
            offset += written
        }
    }
}

/// The terminal's mode before raw mode, for the signal handler (set once, before it is installed).
nonisolated(unsafe) private var savedTerminalMode = termios()

/// Restores the terminal's mode and screen, then ends the process (a signal handler: only
/// async-signal-safe calls).
private func restoreTerminalAndExit(_ number: Int32) {
    let sequence: [UInt8] = Array("\u{1b}[?25h\u{1b}[?1049l".utf8)
    _ = sequence.withUnsafeBytes { Glibc.write(STDOUT_FILENO, $0.baseAddress, $0.count) }
    _ = tcsetattr(STDIN_FILENO, TCSAFLUSH, &savedTerminalMode)
    _exit(128 + number)
}

struct TerminalError: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}
