#!/bin/sh
# A stand-in for kubectl (hand-written, for the runner's tests): namespaces live in
# $FAKE_KUBECTL_STATE (space-separated names); deletions are appended to $FAKE_KUBECTL_LOG.
for a in "$@"; do
  case "$a" in
    get) cat "$FAKE_KUBECTL_STATE"; exit 0 ;;
    delete) echo "$@" >> "$FAKE_KUBECTL_LOG"; exit 0 ;;
  esac
done
exit 1
