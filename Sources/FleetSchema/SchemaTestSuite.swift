import FleetJSON

/// Runs test files in the JSON-Schema-Test-Suite format: an array of
/// `{"description", "schema", "tests": [{"description", "data", "valid"}]}`.
///
/// Admins use the same format to test their own metadata with example settings
/// (`fleetset schema test`), and fleetset's own tests run the official 2020-12 suite with it.
public enum SchemaTestSuite {
    /// What happened to one test.
    public enum Outcome: Sendable, Hashable {
        /// The validator agreed with `valid`.
        case passed
        /// It did not, or the schema was invalid; the reason says which.
        case failed(String)
        /// The schema is unsupported, so nothing was validated; the reason says why.
        case skipped(String)
    }

    /// One test's result.
    public struct Result: Sendable, Hashable, CustomStringConvertible {
        /// The group's (schema's) description.
        public let group: String
        /// The test's description.
        public let test: String
        /// What happened.
        public let outcome: Outcome

        /// `group: test: reason`, or `group: test: passed`.
        public var description: String {
            switch outcome {
            case .passed: "\(group): \(test): passed"
            case .failed(let reason): "\(group): \(test): \(reason)"
            case .skipped(let reason): "\(group): \(test): skipped: \(reason)"
            }
        }
    }

    /// Why a file is not a test file, with the JSON pointer of the bad place.
    public struct FormatError: Error, Sendable, CustomStringConvertible {
        /// Where in the file.
        public let location: JSONPointer
        /// What is wrong.
        public let message: String

        public var description: String { "\(location.displayText): \(message)" }
    }

    /// The counts a run ends with.
    public struct Summary: Sendable, Hashable, CustomStringConvertible {
        /// Tests whose verdict matched.
        public var passed = 0
        /// Tests whose verdict did not match, or whose schema was invalid.
        public var failed = 0
        /// Tests whose schema is unsupported.
        public var skipped = 0

        /// A summary with the given counts.
        public init(passed: Int, failed: Int, skipped: Int) {
            self.passed = passed
            self.failed = failed
            self.skipped = skipped
        }

        /// Counts `results`.
        public init(_ results: [Result] = []) {
            for result in results { add(result) }
        }

        /// Counts one more result.
        public mutating func add(_ result: Result) {
            switch result.outcome {
            case .passed: passed += 1
            case .failed: failed += 1
            case .skipped: skipped += 1
            }
        }

        /// `N passed, M failed, K skipped`.
        public var description: String { "\(passed) passed, \(failed) failed, \(skipped) skipped" }
    }

    /// Runs every test in `file`.
    public static func run(_ file: JSONValue, registry: SchemaRegistry, options: JSONSchema.Options = .standard) throws(FormatError)
        -> [Result]
    {
        guard case .array(let groups) = file else {
            throw FormatError(location: .root, message: "must be an array of {description, schema, tests} objects")
        }
        var results: [Result] = []
        for (groupIndex, group) in groups.enumerated() {
            let groupLocation = JSONPointer.root.appending(index: groupIndex)
            guard case .string(let groupDescription)? = group["description"] else {
                throw FormatError(location: groupLocation.appending("description"), message: "must be a string")
            }
            guard let schemaValue = group["schema"] else {
                throw FormatError(location: groupLocation.appending("schema"), message: "is missing")
            }
            guard case .array(let tests)? = group["tests"] else {
                throw FormatError(location: groupLocation.appending("tests"), message: "must be an array")
            }
            let compiled = Swift.Result { () throws(SchemaError) in try JSONSchema(schemaValue, registry: registry, options: options) }
            for (testIndex, test) in tests.enumerated() {
                let testLocation = groupLocation.appending("tests").appending(index: testIndex)
                guard case .string(let testDescription)? = test["description"] else {
                    throw FormatError(location: testLocation.appending("description"), message: "must be a string")
                }
                guard let data = test["data"] else {
                    throw FormatError(location: testLocation.appending("data"), message: "is missing")
                }
                guard case .bool(let expected)? = test["valid"] else {
                    throw FormatError(location: testLocation.appending("valid"), message: "must be true or false")
                }
                let outcome: Outcome
                switch compiled {
                case .failure(let error) where error.kind == .unsupported:
                    outcome = .skipped(error.description)
                case .failure(let error):
                    outcome = .failed("the schema is invalid: \(error)")
                case .success(let schema):
                    outcome = verdict(schema, data, expected: expected)
                }
                results.append(Result(group: groupDescription, test: testDescription, outcome: outcome))
            }
        }
        return results
    }

    private static func verdict(_ schema: JSONSchema, _ data: JSONValue, expected: Bool) -> Outcome {
        let errors = schema.validate(data)
        let fastVerdict = schema.isValid(data)
        guard fastVerdict == errors.isEmpty else {
            return .failed("the validator disagrees with itself (isValid \(fastVerdict), \(errors.count) errors)")
        }
        switch (expected, errors.isEmpty) {
        case (true, true), (false, false): return .passed
        case (true, false): return .failed("expected valid, got: " + errors.map(\.description).joined(separator: "; "))
        case (false, true): return .failed("expected invalid, but it validated")
        }
    }
}
