// Package repocheck holds no code of its own: its tests check the
// repository's build files against the code they build, so that a rule
// of the Makefile (which tests CI runs, which fuzz targets `make fuzz`
// covers) cannot drift from the tree.
package repocheck
