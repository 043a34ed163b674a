//! With the `serde` feature: `Serialize` and `Deserialize` for [`Mutex`] and [`RwLock`], as
//! parking_lot offers them, so a struct with a lock field that derives them compiles as it
//! does on parking_lot. Serializing takes the lock (a read lock for the RwLock) and
//! serializes the data; a poisoned lock is a serialization error, as its data may be half
//! updated. Deserializing builds a new, unlocked lock.

use serde::de::{Deserialize, Deserializer};
use serde::ser::{Error, Serialize, Serializer};

use super::{Mutex, RwLock};

#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
impl<T: ?Sized + Serialize> Serialize for Mutex<T> {
    #[cfg_attr(feature = "deadlock", track_caller)]
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.lock() {
            Ok(guard) => (*guard).serialize(serializer),
            Err(_) => Err(S::Error::custom("cannot serialize a poisoned Mutex")),
        }
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
impl<'de, T: Deserialize<'de>> Deserialize<'de> for Mutex<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Mutex<T>, D::Error> {
        T::deserialize(deserializer).map(Mutex::new)
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
impl<T: ?Sized + Serialize> Serialize for RwLock<T> {
    #[cfg_attr(feature = "deadlock", track_caller)]
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.read() {
            Ok(guard) => (*guard).serialize(serializer),
            Err(_) => Err(S::Error::custom("cannot serialize a poisoned RwLock")),
        }
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
impl<'de, T: Deserialize<'de>> Deserialize<'de> for RwLock<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<RwLock<T>, D::Error> {
        T::deserialize(deserializer).map(RwLock::new)
    }
}
