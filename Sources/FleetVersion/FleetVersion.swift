/// fleetset's version, one value for every binary and package.
///
/// `current` is generated at build time from the `VERSION` file at the top of the package (the
/// `VersionFile` build plugin); `scripts/package` reads the same file for the packages' version.
public enum FleetVersion {}
