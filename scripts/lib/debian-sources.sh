# shellcheck shell=bash
# Sourced by the scripts that run mmdebstrap (scripts/fresh-root-check.sh,
# scripts/build-image.sh). Sets:
#   debian_sources  this machine's Debian sources for bookworm (main, updates, security,
#                   backports), one "deb URI SUITE COMPONENT..." line each, as apt itself
#                   resolves them from sources.list and sources.list.d; third-party
#                   repositories are left out
#   debian_aptopts  how this machine reaches them (a proxy, a snapshot mirror's stale
#                   Valid-Until), as mmdebstrap --aptopt=... arguments
# Exits 1 when no bookworm source is configured.
mapfile -t debian_sources < <(
  apt-get indextargets --format '$(REPO_URI) $(RELEASE) $(COMPONENT)' 'Created-By: Packages' |
    awk '$2 ~ /^bookworm(-updates|-security|-backports)?$/ { c[$1" "$2] = c[$1" "$2] " " $3 }
         END { for (k in c) { n = split(c[k], a, " "); delete seen; s = "";
                 for (i = 1; i <= n; i++) if (!(a[i] in seen)) { seen[a[i]]; s = s " " a[i] }
                 print "deb " k s } }' | sort)
if ((${#debian_sources[@]} == 0)); then
  echo "$(basename "$0"): no Debian bookworm apt source configured on this machine" >&2
  exit 1
fi
debian_aptopts=()
while IFS= read -r line; do
  debian_aptopts+=("--aptopt=$line")
done < <(apt-config dump | grep -E '^Acquire::(https?::Proxy|Check-Valid-Until|Check-Date) ' || true)
