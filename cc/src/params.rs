//! Named, range-checked algorithm parameters that can be changed at run time.
//!
//! An algorithm publishes a static table of [`ParamSpec`]s (name, unit, range, default, meaning);
//! a [`Params`] holds the current values in the same order. Algorithms read values by index
//! (a `const` per parameter), the management plane writes them by name. Invariant: every current
//! value is finite and inside its spec's `[min, max]`; a refused write changes nothing.

use crate::error::CcError;

/// One parameter's description.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ParamSpec {
    /// Name used by the management plane and scenario files (kebab-free snake_case).
    pub name: &'static str,
    /// Lowest allowed value.
    pub min: f64,
    /// Highest allowed value.
    pub max: f64,
    /// Value at construction.
    pub default: f64,
    /// Unit and meaning, one line.
    pub doc: &'static str,
}

/// The current values of one algorithm's parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    algorithm: &'static str,
    specs: &'static [ParamSpec],
    values: Vec<f64>,
}

impl Params {
    /// All parameters at their defaults.
    pub fn new(algorithm: &'static str, specs: &'static [ParamSpec]) -> Params {
        Params {
            algorithm,
            specs,
            values: specs.iter().map(|s| s.default).collect(),
        }
    }

    /// The parameter table.
    pub fn specs(&self) -> &'static [ParamSpec] {
        self.specs
    }

    /// Current value by index (the algorithm's own constants). Out of range: NaN, which no
    /// algorithm constant produces because the tables and constants live side by side and a
    /// unit test per algorithm checks them.
    pub fn at(&self, index: usize) -> f64 {
        self.values.get(index).copied().unwrap_or(f64::NAN)
    }

    /// Current value by name.
    pub fn get(&self, name: &str) -> Result<f64, CcError> {
        let i = self.index(name)?;
        Ok(self.values[i])
    }

    /// Set by name; refuses unknown names and values outside the range.
    pub fn set(&mut self, name: &str, value: f64) -> Result<(), CcError> {
        let i = self.index(name)?;
        let spec = &self.specs[i];
        if !value.is_finite() || value < spec.min || value > spec.max {
            return Err(CcError::OutOfRange {
                name: spec.name,
                value,
                min: spec.min,
                max: spec.max,
            });
        }
        self.values[i] = value;
        Ok(())
    }

    /// `(name, current value)` pairs in table order.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, f64)> + '_ {
        self.specs
            .iter()
            .zip(&self.values)
            .map(|(s, v)| (s.name, *v))
    }

    fn index(&self, name: &str) -> Result<usize, CcError> {
        self.specs
            .iter()
            .position(|s| s.name == name)
            .ok_or_else(|| CcError::UnknownParam {
                algorithm: self.algorithm,
                name: name.to_owned(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPECS: &[ParamSpec] = &[ParamSpec {
        name: "beta",
        min: 0.0,
        max: 1.0,
        default: 0.5,
        doc: "test",
    }];

    #[test]
    fn set_checks_name_and_range() {
        let mut p = Params::new("t", SPECS);
        assert_eq!(p.get("beta"), Ok(0.5));
        p.set("beta", 0.25).unwrap();
        assert_eq!(p.at(0), 0.25);
        assert!(matches!(
            p.set("beta", 1.5),
            Err(CcError::OutOfRange { .. })
        ));
        assert!(matches!(
            p.set("beta", f64::NAN),
            Err(CcError::OutOfRange { .. })
        ));
        assert!(matches!(
            p.set("gamma", 0.1),
            Err(CcError::UnknownParam { .. })
        ));
        assert_eq!(p.at(0), 0.25, "a refused write changes nothing");
        assert!(p.at(7).is_nan());
    }
}
