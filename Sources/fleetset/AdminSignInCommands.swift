import ArgumentParser
import FleetClient
import FleetIO
import FleetJSON
import FleetProtocol

#if canImport(Glibc)
import Glibc
#endif

/// Where `fleetset admin login` keeps a person's token and server: `$XDG_CONFIG_HOME/fleetset/`
/// (default `~/.config/fleetset/`), the folder 0700 and the user's own, the token 0600. A
/// folder that is not the user's own, or that others may write to, is not used.
enum AdminLogin {
    static var folder: String? {
        let environment = { (name: String) in getenv(name).map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } }
        if let config = environment("XDG_CONFIG_HOME") { return config + "/fleetset" }
        return environment("HOME").map { $0 + "/.config/fleetset" }
    }

    /// Whether `folder` is a directory (not a link) of this user's that no one else may write to.
    static func isPrivate(_ folder: String) -> Bool {
        ownFolderMode(folder).map { $0 & 0o022 == 0 } ?? false
    }

    /// The mode of `folder` when it is a directory (not a link) of this user's.
    static func ownFolderMode(_ folder: String) -> mode_t? {
        var info = stat()
        guard lstat(folder, &info) == 0, info.st_mode & S_IFMT == S_IFDIR, info.st_uid == getuid() else { return nil }
        return info.st_mode
    }

    /// The token file a login wrote, when its folder is private.
    static var tokenFile: String? { folder.flatMap { isPrivate($0) ? $0 + "/admin-token" : nil } }
    /// The server a login was made to.
    static var serverFile: String? { folder.flatMap { isPrivate($0) ? $0 + "/admin-server" : nil } }

    static var savedServer: String? {
        guard let path = serverFile, let bytes = try? FileSystem.readFileIfPresent(path) else { return nil }
        let text = String(decoding: bytes, as: UTF8.self).split(separator: "\n").first.map(String.init)
        return text?.isEmpty == false ? text : nil
    }

    /// Makes the folder (0700) or checks the one there, and makes it 0700.
    static func prepare(_ folder: String) throws {
        try FileSystem.makeDirectories(folder, mode: 0o700)
        guard ownFolderMode(folder) != nil else {
            StandardError.write("fleetset admin login: \(folder) is not a folder of yours; the token is not written there")
            throw CLIExit.usageOrIO
        }
        guard chmod(folder, 0o700) == 0 else {
            StandardError.write("fleetset admin login: cannot make \(folder) private (chmod 700)")
            throw CLIExit.usageOrIO
        }
    }
}

/// A password: the first line of `--password-file`, else typed at a terminal (not echoed), else
/// the first line of standard input.
enum PasswordInput {
    /// `text` on standard error as it is (no line break added).
    static func prompt(_ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
    }

    static func read(file: String?, prompt: String) throws -> String {
        if let file {
            // The first line as it is: a password may begin or end with a space.
            do {
                let text = String(decoding: try FileSystem.readFile(file, maximumSize: 4096), as: UTF8.self)
                let line = text.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
                return String(line.hasSuffix("\r") ? line.dropLast() : line)
            } catch {
                StandardError.write("fleetset admin: \(error)")
                throw CLIExit.usageOrIO
            }
        }
        var saved = termios()
        let terminal = isatty(STDIN_FILENO) == 1 && tcgetattr(STDIN_FILENO, &saved) == 0
        if terminal {
            Self.prompt(prompt)
            var quiet = saved
            quiet.c_lflag &= ~tcflag_t(ECHO)
            _ = tcsetattr(STDIN_FILENO, TCSANOW, &quiet)
        }
        defer {
            if terminal {
                _ = tcsetattr(STDIN_FILENO, TCSANOW, &saved)
                Self.prompt("\n")
            }
        }
        guard let line = readLine(strippingNewline: true), !line.isEmpty else {
            StandardError.write("fleetset admin: no password given (--password-file FILE, or type it)")
            throw CLIExit.usageOrIO
        }
        return line
    }
}

/// `fleetset admin login --server URL --name NAME [--password-file F] [--code C] [--expires 30d]`,
/// or `fleetset admin login --sso` through the organization's identity provider.
struct AdminLoginCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "login",
        abstract: "Sign in with your name and password, or your organization's sign-in (--sso); keep a personal API token.",
        discussion: """
            With --sso, the server's identity provider signs you in (OAuth 2.0 device grant, as \
            `gh auth login` does): open the address shown, enter the code, approve; the command \
            waits meanwhile. Where the provider offers no device grant, make a personal token \
            on the console's Account page and pass it with --token-file instead. \
            The token is written to $XDG_CONFIG_HOME/fleetset/admin-token (default \
            ~/.config/fleetset/admin-token, mode 0600, its folder 0700) and the server to \
            admin-server beside it: later `fleetset admin` commands use them when neither \
            --token-file nor FLEETSET_ADMIN_TOKEN_FILE is given. An account with a second factor \
            needs --code (the authenticator's code, or a recovery code). `fleetset admin logout` \
            revokes the token and removes the file.
            """)

    @Option(help: "The server's base URL (default: $FLEETSET_SERVER).")
    var server: String?

    @Option(help: "Your account's name.")
    var name: String?

    @Flag(help: "Sign in through the server's identity provider (single sign-on) instead of a name and password.")
    var sso = false

    @Option(help: "A file whose first line is your password (default: typed, or standard input).")
    var passwordFile: String?

    @Option(help: "The code from your authenticator app, or a recovery code.")
    var code: String?

    @Option(help: "How long the token lives: 12h, 30d (at most 400d).")
    var expires: String = "30d"

    @Option(help: "PEM CA bundle to verify the server with (default: the system's).")
    var caFile: String?

    func validate() throws {
        if sso && (name != nil || passwordFile != nil || code != nil) {
            throw ValidationError("--sso signs in at the identity provider: give no --name, --password-file or --code")
        }
        if !sso && name == nil { throw ValidationError("give --name NAME (or --sso to sign in through the identity provider)") }
        guard let seconds = AdminTokenCreate.seconds(expires), (60...APITokenRequest.longestLifetime).contains(seconds) else {
            throw ValidationError("--expires is a number and m, h or d, from 1m to 400d (e.g. 30d)")
        }
    }

    func run() async throws {
        guard let folder = AdminLogin.folder else {
            StandardError.write("fleetset admin login: set HOME or XDG_CONFIG_HOME: the token is kept in their config folder")
            throw CLIExit.usageOrIO
        }
        let tokenFile = folder + "/admin-token"
        let serverFile = folder + "/admin-server"
        let options = try ServerOptions.parse((server.map { ["--server", $0] } ?? []) + (caFile.map { ["--ca-file", $0] } ?? []))
        let url = try options.serverURL()
        let lifetime = AdminTokenCreate.seconds(expires) ?? SignInRequest.defaultLifetime
        let made: CreatedAPIToken
        if sso {
            made = try await singleSignOn(options, lifetime: lifetime)
        } else {
            let name = name ?? ""
            let password = try PasswordInput.read(file: passwordFile, prompt: "Password for \(name): ")
            let request = SignInRequest(name: name, password: password, code: code, tokenName: "login", expiresIn: lifetime)
            made = try await options.withClient(token: nil) { try await $0.signIn(request) }
        }
        try AdminLogin.prepare(folder)
        do {
            try FileSystem.writeAtomically(Array((made.token + "\n").utf8), to: tokenFile, mode: 0o600)
            try FileSystem.writeAtomically(Array((url + "\n").utf8), to: serverFile, mode: 0o600)
        } catch {
            StandardError.write("fleetset admin login: \(error)")
            throw CLIExit.usageOrIO
        }
        print(
            TerminalText.escaped(
                "signed in to \(url) as \(made.info.account); token \(made.info.id) valid until \(Timestamp.format(made.info.expiresAt)), kept in \(tokenFile)"
            ))
    }
}

extension AdminLoginCommand {
    /// The device grant with the server's identity provider, then its tokens exchanged for a
    /// personal API token. The prompt goes to standard error (standard output keeps the result).
    func singleSignOn(_ options: ServerOptions, lifetime: Int64) async throws -> CreatedAPIToken {
        let info = try await options.withClient(token: nil) { try await $0.singleSignOnInfo() }
        let tokens: DeviceGrant.Tokens
        do {
            tokens = try await DeviceGrant(info).run(
                show: { prompt in
                    let target = prompt.verificationURIComplete ?? prompt.verificationURI
                    StandardError.write(
                        TerminalText.escaped(
                            "To sign in, open \(target) in a browser and enter the code \(prompt.userCode) (this command waits)"))
                },
                now: { Int64(time(nil)) })
        } catch {
            StandardError.write(TerminalText.escaped("fleetset admin login: \(error)"))
            throw CLIExit.usageOrIO
        }
        let request = SingleSignOnSignIn(idToken: tokens.idToken, accessToken: tokens.accessToken, tokenName: "login", expiresIn: lifetime)
        return try await options.withClient(token: nil) { try await $0.signIn(request) }
    }
}

/// `fleetset admin logout`: revokes the login's token and removes it.
struct AdminLogoutCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "logout", abstract: "Revoke the token `fleetset admin login` kept, and remove it.")

    @Option(help: "PEM CA bundle to verify the server with (default: the system's).")
    var caFile: String?

    func run() async throws {
        guard let tokenFile = AdminLogin.tokenFile, access(tokenFile, F_OK) == 0, let server = AdminLogin.savedServer else {
            print("not signed in")
            return
        }
        // Revoked at the server it was made for, when it can be; removed here whatever happens.
        var outcome = "its login token is revoked"
        do {
            let options = try ServerOptions.parse(
                ["--server", server, "--token-file", tokenFile] + (caFile.map { ["--ca-file", $0] } ?? []))
            let caller = try await options.withClient { try await $0.whoami() }
            if caller.credential.hasPrefix("token ") {
                let id = String(caller.credential.dropFirst("token ".count))
                _ = try await options.withClient { try await $0.revokeAPIToken(id: id) }
            }
            outcome = "signed out \(caller.account.name); " + outcome
        } catch {
            outcome =
                "the token could not be revoked (it may have expired, or the server is out of reach); revoke it with `fleetset admin tokens revoke` if it still works"
        }
        for path in [tokenFile, AdminLogin.serverFile].compactMap(\.self) where unlink(path) != 0 && errno != ENOENT {
            StandardError.write("fleetset admin logout: cannot remove \(path): \(String(cString: strerror(errno)))")
            throw CLIExit.usageOrIO
        }
        print(TerminalText.escaped(outcome))
    }
}

/// `fleetset admin password [--password-file F] [--current-file F]`: change your own password.
struct AdminPasswordCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "password", abstract: "Change your own password.")

    @OptionGroup var server: ServerOptions

    @Option(help: "A file whose first line is your current password (default: typed).")
    var currentFile: String?

    @Option(help: "A file whose first line is the new password, 12 to 256 characters (default: typed).")
    var passwordFile: String?

    func run() async throws {
        let caller = try await server.withClient { try await $0.whoami() }
        let current = caller.account.hasPassword ? try PasswordInput.read(file: currentFile, prompt: "Current password: ") : nil
        let password = try PasswordInput.read(file: passwordFile, prompt: "New password: ")
        try await server.withClient { try await $0.changeOwnPassword(PasswordChange(current: current, password: password)) }
        print(TerminalText.escaped("the password of \(caller.account.name) is changed"))
    }
}

/// `fleetset admin users set-password NAME [--password-file F]`.
struct AdminUserSetPassword: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set-password", abstract: "Set a person's password (a first one, or a replacement for a forgotten one).")

    @OptionGroup var server: ServerOptions

    @Argument(help: "The account's name.")
    var name: String

    @Option(help: "A file whose first line is the password, 12 to 256 characters (default: typed).")
    var passwordFile: String?

    func run() async throws {
        let password = try PasswordInput.read(file: passwordFile, prompt: "Password for \(name): ")
        try await server.withClient { try await $0.setPassword(account: name, to: password) }
        print(TerminalText.escaped("the password of \(name) is set"))
    }
}

/// `fleetset admin users reset-two-factor NAME`.
struct AdminUserResetTwoFactor: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reset-two-factor", abstract: "Remove a person's second factor (its authenticator and recovery codes were lost).")

    @OptionGroup var server: ServerOptions

    @Argument(help: "The account's name.")
    var name: String

    func run() async throws {
        try await server.withClient { try await $0.resetTwoFactor(account: name) }
        print(TerminalText.escaped("\(name) signs in with its password alone until it sets up another second factor"))
    }
}

/// `fleetset admin two-factor setup|confirm`.
struct AdminTwoFactor: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "two-factor", abstract: "Set up your second factor: an authenticator app's codes at sign-in.",
        subcommands: [Setup.self, Confirm.self])

    struct Setup: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Make a new TOTP secret; write its otpauth:// URI to a file (0600) for your authenticator app.")

        @OptionGroup var server: ServerOptions

        @Option(help: "Where to write the otpauth:// URI (created with mode 0600; never printed).")
        var out: String

        func run() async throws {
            let setup = try await server.withClient { try await $0.startTwoFactor() }
            try AdminSecretFile.write(setup.uri + "\n", to: out)
            print(
                TerminalText.escaped(
                    "the otpauth:// URI is in \(out); add it to your authenticator app, then run `fleetset admin two-factor confirm CODE --out FILE`"
                ))
        }
    }

    struct Confirm: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Confirm with a code from the authenticator; write the ten recovery codes to a file (0600).")

        @OptionGroup var server: ServerOptions

        @Argument(help: "The code the authenticator app shows now.")
        var code: String

        @Option(help: "Where to write the recovery codes (created with mode 0600; never printed).")
        var out: String

        func run() async throws {
            let codes = try await server.withClient { try await $0.confirmTwoFactor(code: code) }
            try AdminSecretFile.write(codes.codes.joined(separator: "\n") + "\n", to: out)
            print(
                TerminalText.escaped(
                    "second factor on: sign-in takes a code from now on; \(codes.codes.count) recovery codes, each good once, are in \(out)"
                ))
        }
    }
}

/// A secret the CLI was given once, written to a file only its user can read.
enum AdminSecretFile {
    static func write(_ text: String, to path: String) throws {
        do {
            try FileSystem.writeAtomically(Array(text.utf8), to: path, mode: 0o600)
        } catch {
            StandardError.write("fleetset admin: \(error)")
            throw CLIExit.usageOrIO
        }
    }
}
