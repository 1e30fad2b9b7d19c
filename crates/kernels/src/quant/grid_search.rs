//! The lookup tables ggml's i-quant quantizers search (`iq2xs_init_impl`, `iq3xs_init_impl`):
//! for every point of the lattice a grid's codes span, either its index in the grid or the list
//! of grid entries nearest to it.
//!
//! A grid entry is `N` small levels `l_j` (packed at bits `bits·j` in the `*_PACKED` tables of
//! [`super::iq_grids`]); ggml places it at the lattice point `2·l_j + 1`. A quantizer rounds a
//! group of values to levels, packs them the same way and looks the packed number up: on the
//! grid it is used as is; off the grid, the candidates are the grid entries at the `nwant`
//! smallest squared distances from it, in order of distance and then of index (ggml sorts by
//! that pair), and the quantizer keeps the one with the least weighted error.
//!
//! The tables are built once per process, on first use, in parallel.

use std::sync::LazyLock;

use rayon::prelude::*;

use super::util::nearest_int;

use super::iq_grids::{
    IQ1S_PACKED, IQ2S_PACKED, IQ2XS_PACKED, IQ2XXS_PACKED, IQ3S_PACKED, IQ3XXS_PACKED,
};

/// A grid and its lattice lookup, for groups of `N` values.
pub(crate) struct GridSearch<const N: usize> {
    /// Each grid entry as ggml lays it out: coordinate `j` is `2·l_j + 1`.
    points: Vec<[i8; N]>,
    /// Per packed lattice point: its grid index (`>= 0`), or `-(offset + 1)` where `offset` is
    /// the start of its list in `neighbours` (ggml's `kmap`).
    map: Vec<i32>,
    /// Lists of nearest grid entries, each its length followed by the indices.
    neighbours: Vec<u16>,
    /// Bits per packed level.
    bits: u32,
    /// Levels a value may round to (`0..levels`).
    levels: i32,
}

/// Where a packed lattice point lies.
pub(crate) enum Lookup<'a> {
    /// On the grid, at this index.
    OnGrid(usize),
    /// Off the grid; the nearest grid entries, nearest first.
    Neighbours(&'a [u16]),
}

impl<const N: usize> GridSearch<N> {
    /// The tables of the grid `packed` (levels `0..levels` of `bits` bits), for lattice points
    /// packed into `map_size` numbers, keeping the entries at the `nwant` smallest distances.
    fn build(packed: &[u16], bits: u32, levels: i32, map_size: usize, nwant: usize) -> Self {
        let mask = (1u32 << bits) - 1;
        let lattice = |code: u32| -> [i8; N] {
            std::array::from_fn(|j| (2 * ((code >> (bits * j as u32)) & mask) + 1) as i8)
        };
        let points: Vec<[i8; N]> = packed.iter().map(|&p| lattice(p as u32)).collect();
        let mut map = vec![-1i32; map_size];
        for (i, &p) in packed.iter().enumerate() {
            map[p as usize] = i as i32;
        }
        let lists: Vec<Option<Vec<u16>>> = (0..map_size)
            .into_par_iter()
            .map(|u| (map[u] < 0).then(|| nearest(&points, &lattice(u as u32), nwant)))
            .collect();
        let mut neighbours = Vec::new();
        for (u, list) in lists.into_iter().enumerate() {
            if let Some(list) = list {
                map[u] = -(neighbours.len() as i32 + 1);
                neighbours.push(list.len() as u16);
                neighbours.extend(list);
            }
        }
        GridSearch {
            points,
            map,
            neighbours,
            bits,
            levels,
        }
    }

    /// Levels a value may round to (`0..levels`).
    pub(crate) fn levels_count(&self) -> i32 {
        self.levels
    }

    /// `N` levels packed as the map indexes them (level `j` at bits `bits·j`).
    #[inline]
    pub(crate) fn pack(&self, levels: &[u8]) -> usize {
        levels
            .iter()
            .enumerate()
            .fold(0, |u, (j, &l)| u | (l as usize) << (self.bits as usize * j))
    }

    /// The grid index of the levels `l` of one group, which the quantizers only ask of levels
    /// that came from the grid (ggml aborts otherwise; 0 here).
    #[inline]
    pub(crate) fn index_of(&self, l: &[u8]) -> usize {
        match self.lookup(self.pack(l)) {
            Lookup::OnGrid(i) => i,
            Lookup::Neighbours(_) => 0,
        }
    }

    /// Rounds the magnitudes `xval` of one group to levels `l` at inverse scale `id` (ggml's
    /// `nearest_int(0.5·(id·x − 1))`, clamped) and, off the grid, replaces them by the
    /// neighbour nearest `xval` at `scale` in the distance weighted by `waux`: the grid index
    /// and whether the rounded levels were on the grid.
    pub(crate) fn snap(
        &self,
        xval: &[f32],
        waux: &[f32],
        id: f32,
        scale: f32,
        l: &mut [u8],
    ) -> (usize, bool) {
        for (q, &x) in l.iter_mut().zip(xval) {
            *q = nearest_int(0.5 * (id * x - 1.0)).clamp(0, self.levels - 1) as u8;
        }
        match self.lookup(self.pack(l)) {
            Lookup::OnGrid(i) => (i, true),
            Lookup::Neighbours(list) => {
                let i = self.best_neighbour(list, xval, waux, scale);
                l.copy_from_slice(&self.levels(i).map(|v| v as u8));
                (i, false)
            }
        }
    }

    /// Where the packed lattice point `u` lies (`u` below the map size the grid was built
    /// for; every group of levels the quantizers form is).
    #[inline]
    pub(crate) fn lookup(&self, u: usize) -> Lookup<'_> {
        match self.map[u] {
            i if i >= 0 => Lookup::OnGrid(i as usize),
            i => {
                let start = (-i - 1) as usize;
                let n = self.neighbours[start] as usize;
                Lookup::Neighbours(&self.neighbours[start + 1..start + 1 + n])
            }
        }
    }

    /// Grid entry `i` as lattice coordinates `2·l + 1`.
    #[cfg(test)]
    pub(crate) fn point(&self, i: usize) -> &[i8; N] {
        &self.points[i]
    }

    /// Of the grid entries `neighbours`, the one whose points times `scale` are nearest `xval`
    /// in `weight`ed squared distance, the first of equals (ggml's `iq2_find_best_neighbour`
    /// and `iq3_find_best_neighbour`); the first entry when no distance is finite.
    pub(crate) fn best_neighbour(
        &self,
        neighbours: &[u16],
        xval: &[f32],
        weight: &[f32],
        scale: f32,
    ) -> usize {
        let mut best_d2 = f32::MAX;
        let mut best = neighbours[0] as usize;
        for &j in neighbours {
            let mut d2 = 0.0f32;
            for ((&q, &x), &w) in self.points[j as usize].iter().zip(xval).zip(weight) {
                let diff = scale * q as f32 - x;
                d2 += w * diff * diff;
            }
            if d2 < best_d2 {
                best_d2 = d2;
                best = j as usize;
            }
        }
        best
    }

    /// Of the grid entries `list`, the one whose levels, as the values `values[l]`, times
    /// `scale` are nearest `xval` in `weight`ed squared distance, the first of equals (ggml's
    /// `iq1_find_best_neighbour2`); the first entry when no distance is finite.
    pub(crate) fn best_valued_neighbour(
        &self,
        list: &[u16],
        xval: &[f32],
        weight: &[f32],
        scale: f32,
        values: &[f32],
    ) -> usize {
        let mut best_score = f32::MAX;
        let mut best = list[0] as usize;
        for &j in list {
            let mut d2 = 0.0f32;
            for (i, &lv) in self.levels(j as usize).iter().enumerate() {
                let diff = scale * values[lv as usize] - xval[i];
                d2 += weight[i] * diff * diff;
            }
            if d2 < best_score {
                best_score = d2;
                best = j as usize;
            }
        }
        best
    }

    /// The levels `l` of grid entry `i`.
    #[inline]
    pub(crate) fn levels(&self, i: usize) -> [i8; N] {
        self.points[i].map(|p| (p - 1) / 2)
    }
}

/// The grid entries at the `nwant` smallest squared distances from `pos`, by distance and then
/// index.
fn nearest<const N: usize>(points: &[[i8; N]], pos: &[i8; N], nwant: usize) -> Vec<u16> {
    let d2: Vec<u32> = points
        .iter()
        .map(|p| {
            p.iter()
                .zip(pos)
                .map(|(&a, &b)| ((a as i32 - b as i32) * (a as i32 - b as i32)) as u32)
                .sum()
        })
        .collect();
    let mut distances: Vec<u32> = d2.clone();
    distances.sort_unstable();
    distances.dedup();
    distances.truncate(nwant);
    let mut out = Vec::new();
    for &d in &distances {
        out.extend((0..points.len()).filter(|&j| d2[j] == d).map(|j| j as u16));
    }
    out
}

/// Packed lattice points of eight 2-bit levels (`0..=2` each): ggml's `kmap_size`.
const MAP_SIZE_2BIT_8: usize = 43692;
/// Packed lattice points of four 3-bit levels.
const MAP_SIZE_3BIT_4: usize = 4096;

/// IQ2_XXS's grid of 256 entries, two distances of neighbours.
pub(crate) static IQ2XXS: LazyLock<GridSearch<8>> =
    LazyLock::new(|| GridSearch::build(&IQ2XXS_PACKED, 2, 3, MAP_SIZE_2BIT_8, 2));

/// IQ2_XS's grid of 512 entries, two distances of neighbours.
pub(crate) static IQ2XS: LazyLock<GridSearch<8>> =
    LazyLock::new(|| GridSearch::build(&IQ2XS_PACKED, 2, 3, MAP_SIZE_2BIT_8, 2));

/// IQ2_S's grid of 1024 entries, the nearest distance only.
pub(crate) static IQ2S: LazyLock<GridSearch<8>> =
    LazyLock::new(|| GridSearch::build(&IQ2S_PACKED, 2, 3, MAP_SIZE_2BIT_8, 1));

/// IQ1_S's (and IQ1_M's) grid of 2048 entries, three distances of neighbours.
pub(crate) static IQ1S: LazyLock<GridSearch<8>> =
    LazyLock::new(|| GridSearch::build(&IQ1S_PACKED, 2, 3, MAP_SIZE_2BIT_8, 3));

/// IQ3_XXS's grid of 256 entries, two distances of neighbours.
pub(crate) static IQ3XXS: LazyLock<GridSearch<4>> =
    LazyLock::new(|| GridSearch::build(&IQ3XXS_PACKED, 3, 8, MAP_SIZE_3BIT_4, 2));

/// IQ3_S's grid of 512 entries, three distances of neighbours.
pub(crate) static IQ3S: LazyLock<GridSearch<4>> =
    LazyLock::new(|| GridSearch::build(&IQ3S_PACKED, 3, 8, MAP_SIZE_3BIT_4, 3));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_entries_map_to_themselves_and_off_grid_points_to_their_nearest_entries() {
        let g = &*IQ3S;
        for (i, &p) in IQ3S_PACKED.iter().enumerate() {
            assert!(matches!(g.lookup(p as usize), Lookup::OnGrid(j) if j == i));
        }
        let off = (0..MAP_SIZE_3BIT_4)
            .find(|&u| matches!(g.lookup(u), Lookup::Neighbours(_)))
            .expect("the grid does not cover the lattice");
        let Lookup::Neighbours(list) = g.lookup(off) else {
            unreachable!()
        };
        assert!(!list.is_empty());
        let pos: [i8; 4] = std::array::from_fn(|j| (2 * ((off >> (3 * j)) & 7) + 1) as i8);
        let dist = |i: u16| -> i32 {
            g.point(i as usize)
                .iter()
                .zip(&pos)
                .map(|(&a, &b)| (a as i32 - b as i32).pow(2))
                .sum()
        };
        let best = (0..512u16).map(dist).min().unwrap();
        assert_eq!(dist(list[0]), best);
        assert!(
            list.windows(2)
                .all(|w| (dist(w[0]), w[0]) < (dist(w[1]), w[1]))
        );
    }
}
