import Foundation
import PackagePlugin

/// Generates `FleetVersion.current` from the package's `VERSION` file, so that the binaries and
/// the packages (`scripts/package`) take the version from that one place.
///
/// The command is a build command with `VERSION` as its input: editing the file regenerates the
/// source and rebuilds what uses it. The generator is `/bin/sh` (no Swift tool to compile); it
/// refuses a version that is not `MAJOR.MINOR.PATCH` with an optional `~` or `+` suffix of
/// letters, digits and dots, which is also a valid Debian upstream version.
@main
struct VersionFile: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: any Target) throws -> [Command] {
        let versionFile = context.package.directoryURL.appending(path: "VERSION")
        let output = context.pluginWorkDirectoryURL.appending(path: "FleetVersionCurrent.swift")
        let script = #"""
            version=$(cat "$1") || exit 1
            case "$version" in
                *[!0-9A-Za-z.~+]* | "" | [!0-9]*)
                    echo "$1: the version must look like 1.2.3 (optionally ~rc1 or +build1), not '$version'" >&2; exit 1 ;;
            esac
            printf '%s\n' \
                '// Generated from VERSION by the VersionFile plugin; do not edit.' \
                'extension FleetVersion {' \
                '    /// This build'"'"'s version, from the VERSION file at the top of the package.' \
                "    public static let current = \"$version\"" \
                '}' > "$2.tmp" && mv "$2.tmp" "$2"
            """#
        return [
            .buildCommand(
                displayName: "Generating FleetVersionCurrent.swift from VERSION",
                executable: URL(filePath: "/bin/sh"),
                arguments: ["-c", script, "sh", versionFile.path(percentEncoded: false), output.path(percentEncoded: false)],
                inputFiles: [versionFile],
                outputFiles: [output])
        ]
    }
}
