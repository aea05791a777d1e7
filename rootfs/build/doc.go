// Package build makes rootfs trees from Debian packages with mmdebstrap and
// installs them in a rootfs.Store (through Store.Create).
//
// A profile (minimal, datasci) names the packages, the smoke test run in the
// new tree and what to trim. Builds keep only what a sandbox runs: dpkg never
// unpacks docs, man pages, translations, C headers or static libraries
// (path-exclude), and packages needed only to build software (the compiler
// toolchain python3-scipy drags in via python3-pythran, boost and BLAS
// headers, perl) are removed with dpkg --purge --force-depends, so
// meta.json's package list stays true; its "trim" record lists what was
// excluded, purged and removed. Setuid/setgid bits are cleared and device
// nodes deleted. The datasci profile also ships matplotlib's font cache in
// /usr/share/nsbox/matplotlib; a hook in the tree's sitecustomize.py copies it
// into matplotlib's cache dir (in the sandbox's empty HOME) on the first
// import of matplotlib. Its check also runs git (an init, a commit, a clone)
// and curl in the new tree.
//
// mmdebstrap runs on a pty (for its progress bars, parsed into
// rootfs.Progress events) in a private mount namespace.
package build
