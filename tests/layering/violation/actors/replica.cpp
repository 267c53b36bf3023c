// A replica that reaches up into the facade: the layering check must refuse it.
#include "varsync/strategy.hpp"
