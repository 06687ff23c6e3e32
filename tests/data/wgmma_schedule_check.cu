// Host-side check of the wgmma template's work schedule (tests/test_wgmma_templates.py appends this file to a
// rendered template and runs it on the CPU): for each plan choose_splits makes, and for plans forced by hand, every
// (tile, K block) is computed by exactly one unit; a tile's units agree on their number, their order along K and
// where each one's partial lives; no two partial units share a slot, and every slot is inside what the host
// allocates. Prints one line per failure and "checked N" at the end; exits 1 on any failure.
#include <cstdio>
#include <map>
#include <set>
#include <vector>

static int failures = 0;
#define CHECK(cond, ...)                                  \
    do {                                                  \
        if (!(cond)) {                                    \
            if (failures++ < 20) std::printf(__VA_ARGS__); \
        }                                                 \
    } while (0)

static void check_plan(Plan plan, int tiles, int kblocks, int slots, const char* what) {
    const int units = plan.stream_k ? slots : plan.first_split + (tiles - plan.first_split) * plan.splits;
    const int blocks = units < slots ? units : slots;
    const long long capacity =
        (plan.stream_k ? 2LL * slots : (long long)(tiles - plan.first_split) * plan.splits) * CLUSTER;
    const int m_rows = 1, n_tiles = tiles;  // the grouped order only maps tiles to coordinates
    for (int rank = 0; rank < CLUSTER; ++rank) {
        std::vector<int> covered((size_t)tiles * kblocks, 0);
        std::map<int, std::vector<std::pair<Unit, Schedule>>> by_tile;  // each unit with its block's schedule
        std::set<int> slots_used;
        for (int b = 0; b < blocks; ++b) {
            const Schedule s(plan, b, blocks, tiles, kblocks, m_rows, n_tiles, rank);
            for (int i = 0; i < s.count; ++i) {
                const Unit u = s.unit(i);
                const bool inside = u.tile >= 0 && u.tile < tiles && 0 <= u.kb0 && u.kb0 < u.kb1 && u.kb1 <= kblocks;
                CHECK(inside, "%s: block %d unit %d: tile %d K blocks [%d, %d)\n", what, b, i, u.tile, u.kb0, u.kb1);
                if (!inside) continue;
                for (int kb = u.kb0; kb < u.kb1; ++kb) covered[(size_t)u.tile * kblocks + kb]++;
                by_tile[u.tile].push_back({u, s});
                if (u.splits > 1) {
                    const int slot = s.part(u, u.split);
                    CHECK(slot >= 0 && slot < capacity, "%s: slot %d outside [0, %lld)\n", what, slot, capacity);
                    CHECK(slots_used.insert(slot).second, "%s: slot %d used twice\n", what, slot);
                }
            }
        }
        for (size_t x = 0; x < covered.size(); ++x)
            CHECK(covered[x] == 1, "%s: tile %zu K block %zu computed %d times\n", what, x / kblocks, x % kblocks,
                  covered[x]);
        for (auto& [tile, us] : by_tile) {
            const int n = (int)us.size();
            std::map<int, size_t> by_split;  // split index -> position in us
            for (size_t j = 0; j < us.size(); ++j) {
                CHECK(us[j].first.splits == n, "%s: tile %d has %d units, a unit says %d\n", what, tile, n,
                      us[j].first.splits);
                by_split[us[j].first.split] = j;
            }
            CHECK((int)by_split.size() == n, "%s: tile %d: units share a split index\n", what, tile);
            int kb = 0;
            for (int sp = 0; sp < n; ++sp) {
                if (!by_split.count(sp)) continue;
                const auto& [u, us_sched] = us[by_split[sp]];
                CHECK(u.kb0 == kb, "%s: tile %d split %d starts at %d, not %d\n", what, tile, sp, u.kb0, kb);
                kb = u.kb1;
                // every unit (the last one sums them) finds split sp's partial where split sp wrote it
                for (const auto& [v, v_sched] : us)
                    CHECK(v_sched.part(v, sp) == us_sched.part(u, sp),
                          "%s: tile %d: units disagree on split %d's slot\n", what, tile, sp);
            }
        }
    }
}

int main() {
    const int slot_counts[] = {132, 114, 66, 7};
    const int tile_counts[] = {1, 5, 32, 40, 96, 131, 132, 133, 192, 240, 264, 288, 448, 1152, 1728};
    const int kblock_counts[] = {1, 2, 4, 12, 16, 18, 56};
    const size_t l2 = 50u << 20;
    int checked = 0;
    char what[160];
    for (int slots : slot_counts)
        for (int tiles : tile_counts)
            for (int kblocks : kblock_counts) {
                std::snprintf(what, sizeof what, "tiles %d kblocks %d slots %d", tiles, kblocks, slots);
                const Plan chosen = choose_splits(tiles, kblocks, slots, l2);
                CHECK(!chosen.stream_k || (long long)(tiles - chosen.first_split) * kblocks >= slots,
                      "%s: stream-K with fewer K blocks than blocks\n", what);
                check_plan(chosen, tiles, kblocks, slots, what);
                ++checked;
                // Stream-K forced over every tile and over the tail after each number of whole rounds.
                for (int whole = 0; whole < tiles; whole += slots) {
                    if ((long long)(tiles - whole) * kblocks < slots) break;
                    check_plan(Plan{whole, 1, 1}, tiles, kblocks, slots, what);
                    ++checked;
                }
            }
    std::printf("checked %d\n", checked);
    return failures == 0 ? 0 : 1;
}
