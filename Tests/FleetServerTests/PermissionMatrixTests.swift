import Curl
import FleetClient
import FleetJSON
import FleetProtocol
import FleetServerCore
import Foundation
import HTTPTypes
import Testing

/// The permission table (``AdminOperation``) against the OpenAPI document and the real server:
/// every admin operation × every role × in and out of the caller's scope answers what the
/// table says. A route added without a rule cannot be defined (routes are defined by their
/// operation); an operation the document has and the table does not, or the other way round,
/// or with another right or other roles, fails here.
@Suite("Permission matrix")
struct PermissionMatrixTests {
    /// One admin operation as the OpenAPI document lists it.
    struct DocumentedOperation: Hashable, CustomStringConvertible {
        var id: String
        var method: String
        var path: String
        var right: String?
        var roles: [String]

        var description: String { "\(method) \(path) (\(id))" }
    }

    /// The operations of `openapi/fleetset-v1.yaml` that take the admin token, read from its lines
    /// (the document's layout: two-space paths, four-space methods, six-space members).
    static func documentedOperations() throws -> [DocumentedOperation] {
        let text = try String(contentsOfFile: ContractTests.document, encoding: .utf8)
        var operations: [DocumentedOperation] = []
        var path = ""
        var current: DocumentedOperation?
        var admin = false
        func finish() {
            if let operation = current, admin { operations.append(operation) }
            current = nil
            admin = false
        }
        for line in text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if line.hasPrefix("components:") { break }
            if line.hasPrefix("  /"), line.hasSuffix(":"), !line.hasPrefix("   ") {
                finish()
                path = String(line.dropFirst(2).dropLast())
            } else if let method = ["get", "put", "post", "patch", "delete"].first(where: { line == "    \($0):" }) {
                finish()
                current = DocumentedOperation(id: "", method: method.uppercased(), path: path, right: nil, roles: [])
            } else if line.hasPrefix("      operationId: ") {
                current?.id = String(line.dropFirst("      operationId: ".count))
            } else if line == "      security: [{ adminToken: [] }]" {
                admin = true
            } else if line.hasPrefix("      x-fleetset-right: ") {
                current?.right = String(line.dropFirst("      x-fleetset-right: ".count))
            } else if line.hasPrefix("      x-fleetset-roles: [") {
                current?.roles = line.dropFirst("      x-fleetset-roles: [".count).dropLast().split(separator: ",").map {
                    $0.trimmingCharacters(in: .whitespaces)
                }
            }
        }
        finish()
        return operations
    }

    /// The table's path in the document's form: `{app}` for `:app`, `{keyPath}` for `**`.
    static func documentPath(_ operation: AdminOperation) -> String {
        "/"
            + operation.route.path.split(separator: "/").map { segment in
                segment == "**" ? "{keyPath}" : segment.hasPrefix(":") ? "{\(segment.dropFirst())}" : String(segment)
            }.joined(separator: "/")
    }

    @Test("the document and the table list the same admin operations, each with the same method, path, right and roles")
    func documentMatchesTable() throws {
        let documented = Dictionary(uniqueKeysWithValues: try Self.documentedOperations().map { ($0.id, $0) })
        #expect(documented.count >= 30, "the document's admin operations were not found: \(documented.keys.sorted())")
        for operation in AdminOperation.allCases {
            guard let entry = documented[operation.rawValue] else {
                Issue.record("the document has no operation \(operation.rawValue)")
                continue
            }
            #expect(entry.method == operation.route.method.rawValue && entry.path == Self.documentPath(operation), "\(entry)")
            #expect(entry.right == operation.right?.rawValue, "\(entry): x-fleetset-right")
            #expect(entry.roles == operation.roles.map(\.rawValue), "\(entry): x-fleetset-roles")
        }
        let unknown = Set(documented.keys).subtracting(AdminOperation.allCases.map(\.rawValue))
        #expect(unknown.isEmpty, "operations the table has no rule for: \(unknown.sorted())")
    }

    /// What one request of the matrix expects.
    enum Expected: CustomStringConvertible {
        /// Past the authorization: anything but 401 and 403.
        case allowed
        /// 403 with the code naming the right.
        case refused(AdminRight)
        /// 404 `unknown-device`, as for a device that does not exist.
        case hidden

        var description: String {
            switch self {
            case .allowed: "allowed"
            case .refused(let right): "403 needs-\(right.rawValue)"
            case .hidden: "404 unknown-device"
            }
        }
    }

    /// What the table says `role` gets for `operation` in or out of its scope (`kiosk`).
    static func expected(_ operation: AdminOperation, role: Role, inScope: Bool) -> Expected {
        guard let right = operation.right else { return .allowed }
        guard role.rights.contains(right) else { return .refused(right) }
        guard role.isScoped, !inScope else { return .allowed }
        if operation.route.path.contains(":app") { return .refused(right) }
        if operation.targetsDevice { return .hidden }
        return .allowed
    }

    @Test("every admin operation × every role × in and out of scope answers as the table says, on the real server")
    func matrix() async throws {
        try await TestFleetServer.with(limits: .unreachable) { server in
            try await server.putKioskMetadata()
            let payments = TestMetadata.kiosk(version: 1).replacing("\"app\": \"kiosk\"", with: "\"app\": \"payments\"")
            _ = try await server.admin.putMetadata(app: "payments", document: Array(payments.utf8))
            let kioskDevice = try await server.enrollDevice(apps: ["kiosk"], groups: ["lobby"])
            let paymentsDevice = try await server.enrollDevice(apps: ["payments"])
            // One account per role (the owner is the admin token file's); the scoped ones see app kiosk.
            var tokens: [Role: String] = [.owner: TestFleetServer.adminToken]
            for role in Role.allCases where role != .owner {
                let name = "as-\(role.rawValue)"
                _ = try await server.admin.createAccount(
                    AccountRequest(name: name, role: role, scope: role.isScoped ? AccountScope(apps: ["kiosk"]) : nil))
                tokens[role] = try await server.admin.createAPIToken(APITokenRequest(name: "matrix", account: name)).token
            }
            var checked = 0
            for operation in AdminOperation.allCases {
                for role in Role.allCases {
                    for inScope in [true, false] {
                        let app = inScope ? "kiosk" : "payments"
                        var device = inScope ? kioskDevice.id : paymentsDevice.id
                        if operation == .deleteDevice {
                            // A device of its own each time: a delete that is let through removes it.
                            device = try await server.enrollDevice(apps: [app]).id
                        }
                        let path =
                            "/"
                            + operation.route.path.split(separator: "/").map { segment -> String in
                                switch segment {
                                case ":app": app
                                case ":id": operation.targetsDevice ? device : "none-\(operation.rawValue)"
                                case ":name": "nobody"
                                case ":tokenId": "at-none"
                                case ":scope": "app:\(app)"
                                case "**": "volume"
                                default: String(segment)
                                }
                            }.joined(separator: "/")
                        let query = operation.route.path.contains("/values") ? "?scope=app" : ""
                        let method = HTTPClient.Method(rawValue: operation.route.method.rawValue)
                        let contentType =
                            [.patchValues, .patchPolicy, .updateDevice, .updateAccount].contains(operation)
                            ? "application/merge-patch+json" : "application/json"
                        let body: String? =
                            switch operation.route.method {
                            case .get, .delete: nil
                            case .put where operation == .setValueAtKeyPath: "5"
                            default: "{}"
                            }
                        let response = try await server.raw(
                            method, path + query, token: tokens[role], headers: body == nil ? [:] : ["Content-Type": contentType],
                            body: body)
                        let code = (try? JSONParser.parse(response.body)).flatMap { try? ErrorBody(json: $0) }?.error
                        let expected = Self.expected(operation, role: role, inScope: inScope)
                        let context =
                            "\(operation.rawValue) as \(role.rawValue), \(inScope ? "in" : "out of") scope: \(response.status) \(code?.rawValue ?? "")"
                        switch expected {
                        case .allowed: #expect(response.status != 401 && response.status != 403, "expected \(expected): \(context)")
                        case .refused(let right):
                            #expect(response.status == 403 && code == .needs(right), "expected \(expected): \(context)")
                        case .hidden: #expect(response.status == 404 && code == .unknownDevice, "expected \(expected): \(context)")
                        }
                        checked += 1
                    }
                }
            }
            #expect(checked == AdminOperation.allCases.count * Role.allCases.count * 2)
            // Every refusal is in the audit trail, with who and what.
            let refusals = try await server.admin.audit(action: "putMetadata").entries.filter { $0.status == 403 }
            #expect(Set(refusals.map(\.actor)) == ["as-auditor", "as-editor", "as-operator", "as-viewer"] && refusals.count == 7)
            #expect(refusals.allSatisfy { $0.outcome == "needs-write-metadata" && $0.credential.hasPrefix("token at-") })
        }
    }
}
