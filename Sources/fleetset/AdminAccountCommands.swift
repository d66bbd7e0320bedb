import ArgumentParser
import FleetClient
import FleetIO
import FleetJSON
import FleetProtocol

/// `fleetset admin users …`: people and service accounts (an owner's).
struct AdminUsers: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "users", abstract: "People and service accounts: their roles and scopes (owners only).",
        discussion: """
            Roles: owner (everything, accounts included), admin (everything but accounts), editor \
            (the metadata, values, rollouts and reverts of its --app apps, optionally only its \
            --group groups), operator (rollouts resumed and aborted, devices disabled and \
            enabled, token rotations), viewer (reads), auditor (the history and the audit trail).
            """,
        subcommands: [
            AdminUserList.self, AdminUserAdd.self, AdminUserShow.self, AdminUserUpdate.self, AdminUserDisable.self, AdminUserRemove.self,
            AdminUserSetPassword.self, AdminUserResetTwoFactor.self,
        ], defaultSubcommand: AdminUserList.self)
}

/// The role and scope options of `users add` and `users update`.
struct AccountOptions: ParsableArguments {
    @Option(help: "owner, admin, editor, operator, viewer or auditor.")
    var role: String?

    @Option(name: .customLong("app"), help: "An app the account is limited to (repeatable; an editor needs at least one).")
    var apps: [String] = []

    @Option(name: .customLong("group"), help: "A group the account is limited to (repeatable).")
    var groups: [String] = []

    @Option(help: "A name for people, e.g. \"Alice Martin\".")
    var displayName: String?

    func validate() throws {
        if let role, Role(rawValue: role) == nil {
            throw ValidationError("--role must be one of \(Role.allCases.map(\.rawValue).joined(separator: ", "))")
        }
    }

    /// The request's role, scope and display name (the scope only when --app or --group is given).
    var request: AccountRequest {
        AccountRequest(
            displayName: displayName, role: role.flatMap(Role.init(rawValue:)),
            scope: apps.isEmpty && groups.isEmpty ? nil : AccountScope(apps: apps, groups: groups))
    }
}

/// One account as lines of text.
enum AccountText {
    static func render(_ account: Account) -> String {
        TerminalText.escaped(
            """
            \(account.name) (\(account.displayName))\(account.disabled ? " — disabled" : "")
              kind: \(account.kind.rawValue)
              role: \(account.role.rawValue)
              scope: \(account.scope.summary)
              sign-in: \(account.kind == .service ? "API tokens only" : account.hasPassword ? (account.hasTwoFactor ? "password and second factor" : "password") : "no password yet")
              created: \(Timestamp.format(account.createdAt)), changed: \(Timestamp.format(account.updatedAt))
            """, keepingNewlinesAndTabs: true)
    }
}

/// `fleetset admin users list`.
struct AdminUserList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "List the accounts.")

    @OptionGroup var server: ServerOptions

    func run() async throws {
        let list = try await server.withClient { try await $0.accounts() }
        server.output(list.json) {
            var rows = [["NAME", "ROLE", "SCOPE", "KIND", "STATE", "DISPLAY NAME"]]
            for account in list.accounts {
                rows.append([
                    account.name, account.role.rawValue, account.scope.summary, account.kind.rawValue,
                    account.disabled ? "disabled" : "enabled", account.displayName,
                ])
            }
            return Table.render(rows)
        }
    }
}

/// `fleetset admin users add NAME --role ROLE [--app A]… [--group G]… [--service]`.
struct AdminUserAdd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "add", abstract: "Make an account.")

    @OptionGroup var server: ServerOptions

    @Argument(help: "The account's name: 1 to 64 of a-z, 0-9, '.', '_', '-'.")
    var name: String

    @OptionGroup var options: AccountOptions

    @Flag(help: "A service account (a CI job, a scraper): it uses API tokens, never signs in.")
    var service = false

    func validate() throws {
        guard options.role != nil else { throw ValidationError("give the account's --role") }
        guard Account.isValidName(name) else { throw ValidationError("an account's name is 1 to 64 of a-z, 0-9, '.', '_', '-'") }
    }

    func run() async throws {
        var request = options.request
        request.name = name
        request.kind = service ? .service : .person
        let account = try await server.withClient { try await $0.createAccount(request) }
        server.output(account.json) { AccountText.render(account) }
    }
}

/// `fleetset admin users show NAME`.
struct AdminUserShow: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "show", abstract: "Show an account.")

    @OptionGroup var server: ServerOptions

    @Argument(help: "The account's name.")
    var name: String

    func run() async throws {
        let account = try await server.withClient { try await $0.account(name: name) }
        server.output(account.json) { AccountText.render(account) }
    }
}

/// `fleetset admin users update NAME [--role R] [--app A]… [--group G]… [--display-name N] [--enable]`.
struct AdminUserUpdate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "update", abstract: "Change an account's role, scope or display name, or enable it again.",
        discussion: "A new role or scope, or disabling, ends the account's console sessions on every server instance.")

    @OptionGroup var server: ServerOptions

    @Argument(help: "The account's name.")
    var name: String

    @OptionGroup var options: AccountOptions

    @Flag(help: "Enable a disabled account.")
    var enable = false

    func run() async throws {
        var request = options.request
        if enable { request.disabled = false }
        let account = try await server.withClient { try await $0.updateAccount(name: name, request) }
        server.output(account.json) { AccountText.render(account) }
    }
}

/// `fleetset admin users disable NAME`.
struct AdminUserDisable: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "disable", abstract: "Disable an account: its tokens and sessions are refused at once, on every instance.")

    @OptionGroup var server: ServerOptions

    @Argument(help: "The account's name.")
    var name: String

    func run() async throws {
        let account = try await server.withClient { try await $0.updateAccount(name: name, AccountRequest(disabled: true)) }
        server.output(account.json) { AccountText.render(account) }
    }
}

/// `fleetset admin users remove NAME`.
struct AdminUserRemove: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remove", abstract: "Remove an account and its API tokens (the history and the audit trail keep its name).")

    @OptionGroup var server: ServerOptions

    @Argument(help: "The account's name.")
    var name: String

    func run() async throws {
        try await server.withClient { try await $0.removeAccount(name: name) }
        server.output(["removed": .string(name)]) { TerminalText.escaped("removed \(name)") }
    }
}

/// `fleetset admin tokens …`: API tokens.
struct AdminTokens: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tokens", abstract: "API tokens: yours (an owner's: anyone's).",
        subcommands: [AdminTokenList.self, AdminTokenCreate.self, AdminTokenRevoke.self], defaultSubcommand: AdminTokenList.self)
}

/// `fleetset admin tokens list [--account NAME]`.
struct AdminTokenList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list", abstract: "List API tokens with when and from where each was last used.")

    @OptionGroup var server: ServerOptions

    @Option(help: "An owner: this account's tokens (default: an owner sees every account's).")
    var account: String?

    func run() async throws {
        let list = try await server.withClient { try await $0.apiTokens(account: account) }
        server.output(list.json) {
            var rows = [["ID", "NAME", "ACCOUNT", "EXPIRES", "LAST USED", "FROM", "STATE"]]
            for token in list.tokens {
                rows.append([
                    token.id, token.name, token.account, Timestamp.format(token.expiresAt),
                    token.lastUsedAt.map(Timestamp.format) ?? "never",
                    token.lastUsedFrom ?? "-", token.revoked ? "revoked" : "active",
                ])
            }
            return Table.render(rows)
        }
    }
}

/// `fleetset admin tokens create --name NAME --out FILE [--expires 90d] [--account NAME]`.
struct AdminTokenCreate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "create", abstract: "Make an API token and write it to a file (mode 0600); the server keeps only its hash.")

    @OptionGroup var server: ServerOptions

    @Option(help: "What the token is for, e.g. ci-deploy.")
    var name: String

    @Option(help: "Where to write the token (created with mode 0600; never printed).")
    var out: String

    @Option(help: "How long it lives: 30m, 12h, 90d (at most 400d).")
    var expires: String = "90d"

    @Option(help: "An owner: make it for this account (a service account, say).")
    var account: String?

    func validate() throws {
        guard let seconds = Self.seconds(expires), (60...APITokenRequest.longestLifetime).contains(seconds) else {
            throw ValidationError("--expires is a number and m, h or d, from 1m to 400d (e.g. 90d)")
        }
    }

    /// `90d` as seconds.
    static func seconds(_ text: String) -> Int64? {
        guard let unit = text.last, let count = Int64(text.dropLast()), count > 0 else { return nil }
        let seconds: Int64
        switch unit {
        case "m": seconds = 60
        case "h": seconds = 3600
        case "d": seconds = 86_400
        default: return nil
        }
        let (total, overflow) = count.multipliedReportingOverflow(by: seconds)
        return overflow ? nil : total
    }

    func run() async throws {
        let request = APITokenRequest(name: name, expiresIn: Self.seconds(expires) ?? APITokenRequest.defaultLifetime, account: account)
        let made = try await server.withClient { try await $0.createAPIToken(request) }
        do {
            try FileSystem.writeAtomically(Array((made.token + "\n").utf8), to: out, mode: 0o600)
        } catch {
            StandardError.write("fleetset admin: \(error)")
            throw CLIExit.usageOrIO
        }
        guard case .object(var shown) = made.info.json else { return }
        shown["file"] = .string(out)
        server.output(.object(shown)) {
            TerminalText.escaped(
                "API token \(made.info.id) (\(made.info.name)) for \(made.info.account), valid until \(Timestamp.format(made.info.expiresAt)), written to \(out)"
            )
        }
    }
}

/// `fleetset admin tokens revoke ID`.
struct AdminTokenRevoke: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "revoke", abstract: "Revoke an API token: it is refused at once.")

    @OptionGroup var server: ServerOptions

    @Argument(help: "The token's id (at-…), as tokens list shows it.")
    var id: String

    func run() async throws {
        let revoked = try await server.withClient { try await $0.revokeAPIToken(id: id) }
        server.output(revoked.json) { TerminalText.escaped("revoked \(revoked.id) (\(revoked.name)) of \(revoked.account)") }
    }
}

/// `fleetset admin whoami`.
struct AdminWhoami: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "whoami", abstract: "Show the account the token acts as, and its rights.")

    @OptionGroup var server: ServerOptions

    func run() async throws {
        let caller = try await server.withClient { try await $0.whoami() }
        server.output(caller.json) {
            AccountText.render(caller.account) + "\n"
                + TerminalText.escaped(
                    "  credential: \(caller.credential)\n  rights: \(caller.rights.map(\.rawValue).joined(separator: ", "))",
                    keepingNewlinesAndTabs: true)
        }
    }
}

/// `fleetset admin audit [--since T] [--who NAME] [--action OP] [--after N] [--limit N]`.
struct AdminAudit: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "audit", abstract: "The audit trail: who did what, with which credential, from where, when, and how it ended.",
        discussion: "Entries are hash-chained; `fleetset-server audit verify` on the server machine checks the chain.")

    @OptionGroup var server: ServerOptions

    @Option(help: "Entries at or after this RFC 3339 time (2026-11-22T10:00:00Z).")
    var since: String?

    @Option(help: "Entries by this account.")
    var who: String?

    @Option(help: "Entries of this action (an operation such as patchValues, or console.sign-in).")
    var action: String?

    @Option(help: "Entries numbered above this (to page on).")
    var after: Int64?

    @Option(help: "At most this many (up to 1000).")
    var limit: Int?

    func run() async throws {
        let page = try await server.withClient { try await $0.audit(after: after, since: since, who: who, action: action, limit: limit) }
        server.output(page.json) {
            var rows = [["#", "AT", "WHO", "CREDENTIAL", "FROM", "ACTION", "TARGET", "OUTCOME"]]
            for entry in page.entries {
                rows.append([
                    String(entry.sequence), Timestamp.format(entry.at), entry.actor, entry.credential, entry.address, entry.action,
                    entry.target.isEmpty ? "-" : entry.target, "\(entry.status) \(entry.outcome)",
                ])
            }
            return Table.render(rows)
        }
    }
}
