import ArgumentParser
import FleetClient
import FleetIO
import FleetJSON
import FleetProtocol

/// `fleetset admin webhooks …`: where the server sends events (Standard Webhooks, signed).
struct AdminWebhooks: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "webhooks", abstract: "Webhook subscriptions: events the server sends, signed, to a URL.",
        discussion: """
            Events: rollout.started, rollout.wave-admitted, rollout.paused, rollout.completed, \
            rollout.aborted, settings.reverted, metadata.stored, device.error and \
            device.unsupported (per app, at most one a minute), devices.silent, device.enrolled, \
            device.disabled, device.deleted, audit.entry. A message that fails is tried again \
            for a day (5 s, 30 s, 2 min, … 4 h), then dead: `show` lists it, `redeliver` sends \
            it again. Secrets are written to a file of mode 0600, never printed.
            """,
        subcommands: [
            AdminWebhookList.self, AdminWebhookAdd.self, AdminWebhookShow.self, AdminWebhookRedeliver.self, AdminWebhookRotate.self,
            AdminWebhookPing.self, AdminWebhookRemove.self,
        ], defaultSubcommand: AdminWebhookList.self)

    /// Writes a subscription's secret to `path` (mode 0600).
    static func keep(_ created: CreatedWebhook, in path: String) throws {
        do {
            try FileSystem.writeAtomically(Array((created.secret + "\n").utf8), to: path, mode: 0o600)
        } catch {
            StandardError.write("fleetset admin: \(error)")
            throw CLIExit.usageOrIO
        }
    }

    /// What a subscription is, for people.
    static func describe(_ webhook: WebhookInfo) -> String {
        let apps = webhook.apps.isEmpty ? "every app" : webhook.apps.joined(separator: ",")
        return "\(webhook.id) → \(webhook.url): \(webhook.events.joined(separator: ",")) of \(apps)"
    }
}

/// `fleetset admin webhooks list`.
struct AdminWebhookList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "List the subscriptions and their messages' states.")

    @OptionGroup var server: ServerOptions

    func run() async throws {
        let list = try await server.withClient { try await $0.webhooks() }
        server.output(list.json) {
            var rows = [["ID", "URL", "EVENTS", "APPS", "PENDING", "DELIVERED", "DEAD"]]
            for webhook in list.webhooks {
                rows.append([
                    webhook.id, webhook.url, webhook.events.joined(separator: ","),
                    webhook.apps.isEmpty ? "*" : webhook.apps.joined(separator: ","),
                    String(webhook.pending), String(webhook.delivered), String(webhook.dead),
                ])
            }
            return Table.render(rows)
        }
    }
}

/// `fleetset admin webhooks add URL --events A,B [--app APP] --secret-file FILE`.
struct AdminWebhookAdd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add", abstract: "Subscribe a URL to events; its signing secret is written to a file (mode 0600).")

    @OptionGroup var server: ServerOptions

    @Argument(help: "https://… (http:// only for a loopback host).")
    var url: String

    @Option(help: "Event types, comma-separated: rollout.paused,device.error …")
    var events: String

    @Option(name: .customLong("app"), help: "Only this app's events (repeatable; default: every app's).")
    var apps: [String] = []

    @Option(help: "Where to write the secret (whsec_…) the receiver verifies signatures with (mode 0600; never printed).")
    var secretFile: String

    func run() async throws {
        let request = WebhookRequest(url: url, events: events.split(separator: ",").map(String.init), apps: apps)
        let made = try await server.withClient { try await $0.createWebhook(request) }
        try AdminWebhooks.keep(made, in: secretFile)
        server.output(made.info.json) {
            TerminalText.escaped("subscribed \(AdminWebhooks.describe(made.info)); its secret is in \(secretFile)")
        }
    }
}

/// `fleetset admin webhooks show ID`.
struct AdminWebhookShow: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show", abstract: "Show a subscription and its latest messages: attempts, last result, dead letters.")

    @OptionGroup var server: ServerOptions

    @Argument(help: "The subscription's id (wh_…).")
    var id: String

    func run() async throws {
        let detail = try await server.withClient { try await $0.webhook(id: id) }
        server.output(detail.json) {
            let webhook = detail.webhook
            var text = TerminalText.escaped(AdminWebhooks.describe(webhook)) + "\n"
            text += "made \(Timestamp.format(webhook.createdAt)) by \(TerminalText.escaped(webhook.createdBy))"
            if let until = webhook.previousSecretUntil { text += "; the previous secret signs too until \(Timestamp.format(until))" }
            text += "\n\(webhook.pending) pending, \(webhook.delivered) delivered, \(webhook.dead) dead\n\n"
            var rows = [["MESSAGE", "TYPE", "STATE", "OCCURRED", "ATTEMPTS", "LAST RESULT", "NEXT"]]
            for message in detail.messages {
                rows.append([
                    message.id, message.type, message.state, Timestamp.format(message.occurredAt), String(message.attempts),
                    message.lastResult ?? "-", message.nextAttemptAt.map(Timestamp.format) ?? "-",
                ])
            }
            return text + Table.render(rows)
        }
    }
}

/// `fleetset admin webhooks redeliver ID [--message msg_N]`.
struct AdminWebhookRedeliver: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "redeliver", abstract: "Send a message again, or every dead one, with a new day of attempts.")

    @OptionGroup var server: ServerOptions

    @Argument(help: "The subscription's id (wh_…).")
    var id: String

    @Option(help: "The message (msg_…); default: every dead message.")
    var message: String?

    func run() async throws {
        let result = try await server.withClient { try await $0.redeliverWebhook(id: id, message: message) }
        server.output(result.json) { "\(result.redelivered) message(s) of \(TerminalText.escaped(id)) will be sent again" }
    }
}

/// `fleetset admin webhooks rotate-secret ID --secret-file FILE`.
struct AdminWebhookRotate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rotate-secret", abstract: "A new signing secret (to a file, mode 0600); for a day the old one signs too.")

    @OptionGroup var server: ServerOptions

    @Argument(help: "The subscription's id (wh_…).")
    var id: String

    @Option(help: "Where to write the new secret (mode 0600; never printed).")
    var secretFile: String

    func run() async throws {
        let made = try await server.withClient { try await $0.rotateWebhookSecret(id: id) }
        try AdminWebhooks.keep(made, in: secretFile)
        server.output(made.info.json) {
            let until = made.info.previousSecretUntil.map { " until \(Timestamp.format($0))" } ?? ""
            return TerminalText.escaped(
                "new secret of \(made.info.id) in \(secretFile); messages carry the old one's signature too\(until)")
        }
    }
}

/// `fleetset admin webhooks ping ID`.
struct AdminWebhookPing: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "ping", abstract: "Send the subscription a webhook.ping message.")

    @OptionGroup var server: ServerOptions

    @Argument(help: "The subscription's id (wh_…).")
    var id: String

    func run() async throws {
        let result = try await server.withClient { try await $0.pingWebhook(id: id) }
        server.output(result.json) { "a webhook.ping message for \(TerminalText.escaped(id)) is queued; `show` tells how it went" }
    }
}

/// `fleetset admin webhooks remove ID`.
struct AdminWebhookRemove: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remove", abstract: "Remove a subscription and its messages (those not sent yet are not sent).")

    @OptionGroup var server: ServerOptions

    @Argument(help: "The subscription's id (wh_…).")
    var id: String

    func run() async throws {
        try await server.withClient { try await $0.deleteWebhook(id: id) }
        server.output(["removed": .string(id)]) { "removed \(TerminalText.escaped(id))" }
    }
}
