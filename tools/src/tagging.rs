//! Tagger tables for a testbed: the routes a lab sends on, written as a `tagger` routes
//! file, and the tables `tagger compute` makes of them, checked against the port order of
//! the switches pfctools configures (port N of a table is the switch's N-th interface).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use tagger::algo::Algorithm;
use tagger::routes::explicit::RoutesFile;
use tagger::routes::RouteSpec;
use tagger::system::{self, Format, SwitchTables, TagPriorities, TagSystem};
use tagger::topology::NodeRef;

use crate::testbed::TestbedTopology;
use crate::testbed::Topology;

/// Tables computed for a testbed.
#[derive(Clone, Debug)]
pub struct TestbedTables {
    /// Where the testbed file, the routes file and `tables/` were written.
    pub dir: PathBuf,
    pub tables: Vec<SwitchTables>,
}

impl TestbedTables {
    /// The table file of switch `name` (the testbed's node name).
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join("tables").join(format!("{name}.toml"))
    }

    pub fn get(&self, name: &str) -> Option<&SwitchTables> {
        self.tables.iter().find(|t| t.switch == name)
    }
}

pub use pfctestkit::routes_file;

/// Writes `topology` and `routes` into `dir` (`testbed.toml`, `routes.toml`), as a user
/// would hand them to `tagger compute --topology ... --routes file:...`.
pub fn export(topology: &Topology, routes: &RoutesFile, dir: &Path) -> Result<(PathBuf, PathBuf)> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let (topo, route) = (dir.join("testbed.toml"), dir.join("routes.toml"));
    std::fs::write(&topo, toml::to_string(topology)?).with_context(|| format!("writing {}", topo.display()))?;
    std::fs::write(&route, toml::to_string(routes)?).with_context(|| format!("writing {}", route.display()))?;
    Ok((topo, route))
}

/// Computes (greedy), verifies and writes the tables for `routes` on `topology`, tag t
/// on `priorities[t - 1]`, lossy priority 0: what `tagger compute --priorities ...` does.
pub fn compute(topology: &Topology, routes: &RoutesFile, priorities: &[u8], dir: &Path) -> Result<TestbedTables> {
    let (topo_file, routes_file) = export(topology, routes, dir)?;
    let t = tagger::load_topology(&topo_file.display().to_string())?;
    let model = RouteSpec::File(routes_file).model(&t)?;
    let tagging = Algorithm::Greedy.run(&t, model.as_ref())?;
    let sys = TagSystem::new(&t, &tagging, &TagPriorities { lossless: priorities.to_vec(), lossy: 0 })?;
    if let Err(v) = tagger::verify::verify(&t, model.as_ref(), &sys) {
        bail!("the tables fail verification: {v}");
    }
    // The switch numbers its ports in the order the testbed gives its interfaces.
    let ifaces = topology.interfaces()?;
    for sw in &topology.switches {
        let Some(NodeRef::Switch(s)) = t.node(&sw.name) else { bail!("tagger has no switch {}", sw.name) };
        for (k, iface) in ifaces.iter().filter(|i| i.node == sw.name).enumerate() {
            let n = k as u16 + 1;
            let same = t.port_by_number(s, n).is_some_and(|p| {
                t.port(p).name.as_deref() == Some(iface.name.as_str()) || iface.name == format!("p{n}")
            });
            if !same {
                bail!(
                    "tagger's port {n} of {} is not {}, the switch's port {n}: the tables would not fit",
                    sw.name,
                    iface.name
                );
            }
        }
    }
    let tables = sys.tables(&t);
    system::write_tables(&dir.join("tables"), &tables, Format::Toml)?;
    Ok(TestbedTables { dir: dir.to_path_buf(), tables })
}
