// Package repocheck holds no code of its own: its tests check the
// repository's build files and documentation against the tree, so that a
// rule of the Makefile (which tests CI runs, which fuzz targets `make fuzz`
// covers) cannot drift from it, every relative link of the README and
// the pages of docs/ names a file that exists and a heading it has, and
// every code region of examples/ marked "README: <name>" stands in them
// word for word, as does the worker's example origins file in
// docs/credentials.md; and that every function of the module returns its
// error last.
package repocheck
