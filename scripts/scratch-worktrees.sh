# Sourced by the scripts that build copies of the current commit (scripts/mutations.sh,
# scripts/candidates/build.sh): sets $trees, a new temporary folder for their git worktrees,
# and removes every worktree in it, and the folder, when the script exits. Needs $repo, the
# repository's root.
trees=$(mktemp -d)
remove_scratch_worktrees() {
    for tree in "$trees"/*; do
        [ -d "$tree" ] && git -C "$repo" worktree remove --force "$tree" 2>/dev/null
    done
    rm -rf "$trees"
    git -C "$repo" worktree prune
}
trap remove_scratch_worktrees EXIT
